import { toError } from '../errors.ts';
import { untilNextPass } from '../sync/passes.ts';
import type { StatusReporter } from '../sync/status-reporter.ts';
import type { AirtableClient } from './client.ts';
import type { RefetchQueue } from './refetch-queue.ts';
import type { AirtableRunnerOptions } from './runner.ts';
import { type AirtableSyncState, interruptible } from './sync-state.ts';
import { needsRefresh, readPayloads, refreshWebhook, saveWebhookState, type WebhookPayload } from './webhook.ts';

/**
 * Between polls while Airtable's pings arrive: a lost ping is read this late at most. Ten
 * seconds costs a base 0.1 requests a second, against 1 when polling every second.
 */
export const PINGED_POLL_MS = 10_000;

/** What change capture needs of the runner it is part of. */
export interface CaptureHost {
  readonly options: Pick<AirtableRunnerOptions, 'syncId' | 'target' | 'schemas' | 'logger' | 'pollIntervalMs' | 'pingedPollIntervalMs' | 'passRequests'>;
  readonly signal: AbortSignal;
  readonly status: StatusReporter;
  readonly queue: RefetchQueue;
  /** A client; `urgent`: for requests someone waits on (they go before sweep pages), asked at each request. */
  client(urgent: boolean | (() => boolean)): AirtableClient;
  /** Fetches records by id and writes them, one fetch at a time. */
  refetch(client: AirtableClient, tableId: string, ids: string[]): Promise<void>;
  /** Deletes rows in turn with the fetches by id, so none in flight writes them back after. */
  deleteInTurn(tableId: string, ids: string[]): Promise<void>;
  isPass(failuresAtStart: number, kind: 'poll'): boolean;
  /** Ends the pause between cycles: a waiter needs a cycle. */
  endGap(): void;
}

/**
 * Change capture: reads the base webhook's payloads and writes the records they name (at
 * once, or once stable for debounce_ms through the refetch queue), so an edit lands in
 * seconds whatever the base's size. A poll is a pass when everything it read is written.
 */
export class ChangeCapture {
  /** Ends the pause between polls early, while there is one. */
  private endCapturePause: (() => void) | undefined;
  /** The wait-request mark taken when the latest poll started. */
  private captureMark = 0;
  /** The request mark at the start of the latest pass that completed (a cycle's or a poll's): requests up to it are answered. */
  private servedMark = 0;
  /** A poll someone waited on could not count as a pass: poll again once that may have changed. */
  pollWanted = false;
  /** The loop pauses while polls cannot run (first load, no webhook yet): a cycle's end ends that pause. */
  captureParked = false;
  /** When the latest poll that read and applied the payloads ended. */
  private lastGoodPollAt = 0;

  constructor(
    private readonly state: AirtableSyncState,
    private readonly host: CaptureHost,
  ) {}

  private get ready(): boolean {
    return this.state.webhook !== undefined && this.state.settings !== undefined && !this.state.loading;
  }

  /**
   * Change capture is working: a webhook, and a poll that read and applied its payloads within
   * the last few poll intervals. Only then may sweeps slow down (pace.ts).
   */
  get healthy(): boolean {
    const within = Math.max(10_000, 5 * this.intervalMs);
    return this.ready && Date.now() - this.lastGoodPollAt < within;
  }

  /**
   * Airtable pings our /hooks route when the webhook has payloads, and the pings arrive (as
   * far as Airtable and our LISTEN connection know): polls then follow the pings, and the
   * timer only fills in for a lost one.
   */
  private get pingsTrusted(): boolean {
    const webhook = this.state.webhook;
    const requests = this.host.options.passRequests;
    return webhook?.notificationUrl !== undefined && !webhook.notificationFailing && requests?.listening === true && requests.pingMark !== undefined;
  }

  /** The pause between polls nobody asked for. */
  private get intervalMs(): number {
    return this.pingsTrusted ? (this.host.options.pingedPollIntervalMs ?? PINGED_POLL_MS) : (this.host.options.pollIntervalMs ?? 1000);
  }

  /** True when a wait request arrived since the latest capture poll started. */
  get requestPending(): boolean {
    return (this.host.options.passRequests?.requestMark(this.host.options.syncId) ?? 0) !== this.captureMark;
  }

  /**
   * A pass (a cycle's or a poll's) that began at request mark `mark` completed: the wait
   * requests up to there are answered, and no poll is urgent for them any more. (Seen in a test on a
   * busy machine: the waits of a new sync, answered by its first cycle, made the first capture
   * poll after it urgent, with nobody waiting any more.)
   */
  served(mark: number): void {
    if (mark > this.captureMark) this.captureMark = mark;
    if (mark > this.servedMark) this.servedMark = mark;
  }

  /** Starts the next capture poll now (if polls can run; else as soon as they can). */
  pollSoon(): void {
    this.endCapturePause?.();
  }

  /** Polls the webhook's payloads until the sync stops: on a timer, at once for a waiter. */
  async run(): Promise<void> {
    const { passRequests, syncId } = this.host.options;
    this.captureMark = passRequests?.requestMark(syncId) ?? 0;
    let pingMark = passRequests?.pingMark?.(syncId) ?? 0;
    let lastStart = Date.now();
    while (!this.host.signal.aborted) {
      // While polls cannot run, wait requests are left pending; the cycle's end ends this pause.
      this.captureParked = !this.ready;
      const requests = this.captureParked ? undefined : passRequests;
      await interruptible(
        this.host.signal,
        (end) => (this.endCapturePause = end),
        (signal) =>
          untilNextPass({
            requests,
            syncId,
            mark: this.captureMark,
            intervalMs: this.intervalMs,
            lastStart,
            signal,
            // Pings come after each burst of writes: a poll for them at most as often as without them.
            pinged: this.pingsTrusted ? { mark: pingMark, minGapMs: this.host.options.pollIntervalMs ?? 1000 } : undefined,
          }),
      );
      this.captureParked = false;
      if (!this.ready || this.host.signal.aborted) continue;
      // Marked before the poll starts, so a request that arrives during it wakes the next one.
      this.captureMark = passRequests?.requestMark(syncId) ?? 0;
      const mark = this.captureMark;
      pingMark = passRequests?.pingMark?.(syncId) ?? 0;
      lastStart = Date.now();
      try {
        // Only a poll someone waits on goes before the cycles: polls on a timer of every sync of
        // a base would otherwise fill the syncs' share and hold schema changes back for minutes.
        // Asked again at each try of each request: urgent while a wait request no completed pass
        // has answered is pending, one that arrived during this poll too (the poll gets out of
        // the way of the urgent one after it); once another pass has answered, the rest wait their turn.
        await this.pollOnce(
          this.host.client(() => (passRequests?.requestMark(syncId) ?? 0) > this.servedMark),
          mark,
        );
        this.lastGoodPollAt = Date.now();
      } catch (thrown) {
        if (this.host.signal.aborted) break;
        // The next poll tries again from the same cursor; the sweep covers anything meanwhile.
        this.host.options.logger.warn({ error: toError(thrown).message }, 'reading Airtable webhook payloads failed');
      }
    }
  }

  /**
   * One read of the webhook's payloads, applied. It is a pass when everything it read is
   * written: nothing held back by debounce or by a table being rebuilt, and nothing that only
   * a full cycle can catch (see needsCycle).
   */
  private async pollOnce(client: AirtableClient, mark: number): Promise<void> {
    const pass = await this.host.status.passStarted();
    const failuresAtStart = this.host.queue.failures;
    // Refreshed here, not only per cycle: a cycle of a large base can outlast a short-lived webhook.
    if (needsRefresh(this.state.webhook!))
      this.state.webhook = await refreshWebhook(client, this.host.options.target, this.host.options.schemas, this.state.webhook!);
    // Until Airtable has nothing more ready: a pass that stopped at a read's last page left a
    // backlog behind it (over 1,000 changes after an outage) and still answered the waits.
    for (let more = true; more; ) {
      const webhook = this.state.webhook!;
      const read = await readPayloads(client, webhook);
      more = read.more;
      if (read.payloads.length > 0) await this.applyPayloads(client, read.payloads);
      if (read.cursor !== webhook.cursor) {
        // Saved only after the changes are written: a crash re-reads them (at least once).
        this.state.webhook = { ...webhook, cursor: read.cursor };
        await saveWebhookState(this.host.options.target, this.host.options.schemas, this.state.webhook);
      }
    }
    const settled = this.host.isPass(failuresAtStart, 'poll');
    if (settled) {
      await this.host.status.passCompleted(pass);
      this.served(mark);
    }
    // Someone waits: poll again once the cycle or the debounced writes that hold it up are done.
    this.pollWanted = pass.wanted && !settled;
    if (this.pollWanted && this.state.needsCycle !== 0) this.host.endGap();
  }

  private async applyPayloads(client: AirtableClient, payloads: WebhookPayload[]): Promise<void> {
    const changed = new Map<string, Map<string, number>>();
    const destroyed = new Map<string, Set<string>>();
    const entry = <V>(map: Map<string, V>, key: string, make: () => V) => map.get(key) ?? map.set(key, make()).get(key)!;
    for (const payload of payloads) {
      const at = Date.parse(payload.timestamp) || Date.now();
      if (schemaChanged(payload)) this.state.needCycle();
      for (const [tableId, change] of Object.entries(payload.changedTablesById ?? {})) {
        // A table that is neither built nor being built: its records arrive with the next cycle.
        if (!this.state.live.has(tableId) && !this.state.rebuilding.has(tableId)) this.state.needCycle();
        const ids = [...Object.keys(change.createdRecordsById ?? {}), ...Object.keys(change.changedRecordsById ?? {})];
        for (const id of ids) {
          entry(changed, tableId, () => new Map()).set(id, at);
          destroyed.get(tableId)?.delete(id);
        }
        for (const id of change.destroyedRecordIds ?? []) {
          entry(destroyed, tableId, () => new Set()).add(id);
          changed.get(tableId)?.delete(id);
        }
      }
    }
    const debounceMs = this.state.settings?.debounce_ms ?? 0;
    // Every page a sweep made before this read may still list the deleted records: it must not bring them back.
    const readAt = Date.now();
    for (const [tableId, ids] of destroyed) {
      this.state.touched(tableId, ids, readAt);
      for (const id of ids) this.host.queue.forget(tableId, id);
      const rebuildingSet = this.state.rebuilding.get(tableId);
      if (rebuildingSet) for (const id of ids) rebuildingSet.add(id);
      await this.host.deleteInTurn(tableId, [...ids]);
    }
    for (const [tableId, ids] of changed) {
      const rebuildingSet = this.state.rebuilding.get(tableId);
      if (rebuildingSet) {
        for (const id of ids.keys()) rebuildingSet.add(id);
      } else if (debounceMs > 0) {
        // Written once the record has been stable for debounce_ms since its last change.
        for (const [id, at] of ids) this.host.queue.debounce(tableId, id, at + debounceMs);
      } else {
        await this.host.refetch(client, tableId, [...ids.keys()]);
      }
    }
  }
}

/** Fields or tables created, changed or removed: only a cycle's schema read and rebuild bring them in. */
function schemaChanged(payload: WebhookPayload): boolean {
  if (Object.keys(payload.createdTablesById ?? {}).length > 0 || (payload.destroyedTableIds ?? []).length > 0) return true;
  return Object.values(payload.changedTablesById ?? {}).some(
    (change) =>
      Object.keys(change.createdFieldsById ?? {}).length > 0 ||
      Object.keys(change.changedFieldsById ?? {}).length > 0 ||
      (change.destroyedFieldIds ?? []).length > 0 ||
      change.changedMetadata !== undefined,
  );
}
