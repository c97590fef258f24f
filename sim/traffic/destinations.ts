import { pause } from '../../src/time.ts';
import { verifies } from '../../test/harness/standard-webhooks.ts';
import type { DeliveredEvent } from '../check/events.ts';
import { asWebhooksGetIt, loggedSince, samePath } from '../check/paths.ts';
import { type ActorContext, OpCounts, type TrafficActor, type Violation } from '../types.ts';
import type { WebhookReceiver } from '../world.ts';
import type { ApiCall } from './backfills.ts';

/** The kinds a filtered destination takes: every insert and delete, no update, no read. */
const FILTERED_KINDS = ['inserted', 'deleted'];

interface Made {
  syncId: string;
  id: string;
  path: string;
  topics: string[];
  createdAt: number;
}

/** A sync as the simulation made it: its first webhook (every topic) and that webhook's secret. */
export interface SyncHooks {
  syncId: string;
  topics: string[];
  webhook: { id: string; secret: string; path: string };
}

/**
 * What a team does with its webhook destinations while the traffic runs, checked against the
 * REST log with rules of the simulation's own (not the product's filter or signer):
 * - a filtered destination (inserts and deletes only) gets exactly the matching events;
 * - a destination whose receiver answers 410 Gone is disabled, then re-enabled once the
 *   receiver is back, and gets every event since it was made: nothing lost across the pause;
 * - the first webhook's secret is rotated now and then: every delivery verifies with a secret
 *   it was given (Standard Webhooks, several signatures in one header).
 */
export class DestinationControls implements TrafficActor {
  readonly name = 'webhook controls';
  readonly counts = new OpCounts();
  doing: string | undefined;
  private readonly filtered: Made[] = [];
  private readonly gone: Made[] = [];
  private readonly secrets = new Map<string, string[]>();
  private readonly disabledSeen = new Set<string>();

  constructor(private readonly options: ActorContext & { api: ApiCall; receiver: WebhookReceiver; syncs: SyncHooks[] }) {
    for (const sync of options.syncs) this.secrets.set(sync.webhook.id, [sync.webhook.secret]);
  }

  /** Before the traffic: a filtered destination and one that will answer 410, per sync. */
  async setUp(): Promise<void> {
    const { api, receiver } = this.options;
    for (const sync of this.options.syncs) {
      const make = async (path: string, extra: Record<string, unknown>): Promise<Made> => {
        const made = await api('POST', `/api/syncs/${sync.syncId}/webhooks`, { url: `${receiver.url}${path}`, topics: sync.topics, ...extra });
        return { syncId: sync.syncId, id: made.id, path, topics: sync.topics, createdAt: Date.parse(made.created_at) };
      };
      this.filtered.push(await make(`/${sync.syncId}/filtered`, { filter: { events: FILTERED_KINDS } }));
      const gone = await make(`/${sync.syncId}/gone`, {});
      receiver.gone.add(gone.path);
      this.gone.push(gone);
    }
  }

  async run(signal: AbortSignal): Promise<void> {
    const random = this.options.random;
    let reenabled = false;
    const started = Date.now();
    while (!signal.aborted) {
      await pause(15_000 + random.int(15_000), signal);
      if (signal.aborted) return;
      try {
        if (!reenabled && Date.now() - started > 30_000) {
          this.doing = 're-enabling the destinations that answered 410';
          reenabled = await this.reenable();
        } else {
          const sync = this.options.syncs[random.int(this.options.syncs.length)]!;
          this.doing = `rotating the secret of ${sync.webhook.id}`;
          const rotated = await this.options.api('POST', `/api/syncs/${sync.syncId}/webhooks/${sync.webhook.id}/rotate-secret`, {});
          this.secrets.get(sync.webhook.id)!.push(rotated.secret);
          this.counts.ok('webhook.rotate-secret');
          this.options.log(`secret of ${sync.webhook.id} rotated; the previous one signs until ${rotated.previous_expires_at}`);
        }
      } catch (error) {
        // A fault may have the API down: that step waits for the next turn.
        this.counts.no('webhook.control');
        this.options.log(`webhook control failed: ${(error as Error).message.slice(0, 120)}`);
      } finally {
        this.doing = undefined;
      }
    }
  }

  /**
   * Each destination that answered 410: once seen disabled, its receiver comes back and it is
   * enabled again. True once all are. Called during the traffic, and again in the quiet phase.
   */
  async reenable(): Promise<boolean> {
    let all = true;
    for (const made of this.gone) {
      if (!this.options.receiver.gone.has(made.path)) continue;
      const view = await this.options.api('GET', `/api/syncs/${made.syncId}/webhooks/${made.id}`);
      if (view.state !== 'disabled') {
        all = false;
        continue;
      }
      this.disabledSeen.add(made.id);
      this.options.receiver.gone.delete(made.path);
      await this.options.api('PATCH', `/api/syncs/${made.syncId}/webhooks/${made.id}`, { enabled: true });
      this.counts.ok('webhook.re-enable');
      this.options.log(`webhook ${made.id} was disabled (${view.disabled_reason}); enabled again`);
    }
    return all;
  }

  /** The quiet phase: whatever still answers 410 comes back (a destination never disabled is a violation below). */
  async settle(): Promise<void> {
    await this.reenable().catch(() => undefined);
    for (const made of this.gone) {
      if (!this.options.receiver.gone.delete(made.path)) continue;
      await this.options.api('PATCH', `/api/syncs/${made.syncId}/webhooks/${made.id}`, { enabled: true }).catch(() => undefined);
    }
  }

  /** The invariants, for one sync: `log` is its REST log (proved equal to the database). */
  check(syncId: string, log: DeliveredEvent[]): { violations: Violation[]; delivered: number } {
    const violations: Violation[] = [];
    const deliveries = this.options.receiver.deliveries;
    const onPath = (path: string): DeliveredEvent[] =>
      deliveries.filter((d) => d.path === path).map((d, i) => ({ key: d.id, value: d.body, where: `${path} #${i}` }));
    const ofTopics = (made: Made) => asWebhooksGetIt(log).filter((e) => made.topics.includes(e.where.split(' ')[1]!.split('/')[0]!));
    let delivered = 0;

    for (const made of this.filtered.filter((m) => m.syncId === syncId)) {
      const got = onPath(made.path);
      delivered += got.length;
      const kindOf = (e: DeliveredEvent) => (JSON.parse(e.value) as { event: string }).event;
      // A gap marker passes every filter.
      const taken = (e: DeliveredEvent) => FILTERED_KINDS.includes(kindOf(e)) || kindOf(e) === 'gap';
      const wrong = got.filter((e) => !taken(e));
      if (wrong.length > 0)
        violations.push({
          check: 'webhook filter',
          detail: `${made.id} got ${wrong.length} events its filter excludes, e.g. ${kindOf(wrong[0]!)} ${wrong[0]!.key}`,
        });
      const matching = ofTopics(made).filter(taken);
      violations.push(...samePath(`webhook ${made.id} (filtered)`, matching, got, { since: made.createdAt }));
    }

    for (const made of this.gone.filter((m) => m.syncId === syncId)) {
      const got = onPath(made.path);
      delivered += got.length;
      if (!this.disabledSeen.has(made.id)) violations.push({ check: 'webhook disabled', detail: `${made.id} answered 410 Gone but was never seen disabled` });
      // Everything since it was made, the events logged while it was disabled included.
      violations.push(...samePath(`webhook ${made.id} (410, then enabled)`, ofTopics(made), got, { since: made.createdAt }));
      const owed = ofTopics(made).filter((e) => loggedSince(e, made.createdAt)).length;
      if (owed === 0) violations.push({ check: 'webhook disabled', detail: `${made.id} was owed no event: the check proves nothing` });
    }

    const sync = this.options.syncs.find((s) => s.syncId === syncId);
    if (sync) {
      const secrets = this.secrets.get(sync.webhook.id)!;
      const unsigned = deliveries.filter((d) => d.path === sync.webhook.path && !secrets.some((secret) => verifies(secret, d)));
      if (unsigned.length > 0) {
        violations.push({
          check: 'webhook signature',
          detail: `${unsigned.length} deliveries to ${sync.webhook.id} verify with none of its ${secrets.length} secrets, e.g. ${unsigned[0]!.id}`,
        });
      }
    }
    return { violations, delivered };
  }
}
