import type pg from 'pg';
import type { SyncService } from '../control/sync-service.ts';
import type { SyncStore } from '../control/syncs.ts';
import { IdlePools } from '../db/idle-pools.ts';
import { REPLICATION_SILENCE_MS } from './replication.ts';
import { toError } from '../errors.ts';
import type { EventBus } from '../events/bus.ts';
import type { SourceKinds } from '../kinds/registry.ts';
import type { Logger } from '../log.ts';
import type { Runner } from '../lease/worker.ts';
import { Decoder, type DecoderOptions } from './stream.ts';

export interface DecoderFactoryOptions {
  control: pg.Pool;
  store: SyncStore;
  syncService: SyncService;
  bus: EventBus;
  logger: Logger;
  /** The kinds of sync, which say which tables' changes are events and under which collection. */
  kinds: SourceKinds;
  /** Partitions of each new topic. */
  partitions?: number;
  tunables?: Pick<DecoderOptions, 'flushMs' | 'maxBatch' | 'retryMs' | 'lagReportMs' | 'lagRewriteMs' | 'silenceMs'>;
  /** Whatever else runs per sync beside its decoder (the Kafka relay, webhook delivery). */
  alongside?: Array<(syncId: string) => Promise<Runner>>;
  /** How often the syncs of a database are looked up again for what runs beside the decoder (default 30 s). */
  followMs?: number;
}

/**
 * The decoder of one sync database, and what else reads its syncs' events, as one leased unit.
 * The lease is the sync's that made the database; syncs made into it later (`database_of`)
 * are served by the same decoder, and their webhooks and Kafka relay start and stop as they
 * come and go: when the decoder meets their tables, and at least every `followMs`.
 */
export function decoderFactory(options: DecoderFactoryOptions): (syncId: string) => Promise<Runner> {
  // One kept connection per decoder for its slot-lag reads: kept past the report interval. A
  // read that hangs (a dead path) is given up as the replication session's silence is.
  const pools = new IdlePools({ max: 1, idleConnectionMs: 60_000, queryTimeoutMs: options.tunables?.silenceMs ?? REPLICATION_SILENCE_MS });
  return async (syncId) => {
    const sync = await options.store.get(syncId);
    if (sync?.state !== 'active') throw new Error(`sync ${syncId} is not active`);
    const logger = options.logger.child({ sync: sync.id });
    const beside = new Map<string, Promise<Runner[]>>();
    let stopped = false;
    const startBeside = (id: string) => {
      const made = Promise.all((options.alongside ?? []).map((make) => make(id)));
      beside.set(id, made);
      made.then(
        (runners) => {
          if (!stopped) for (const runner of runners) runner.start();
        },
        (err: unknown) => {
          beside.delete(id);
          logger.warn({ err: toError(err), member: id }, 'could not start delivery for a sync of this database; trying again later');
        },
      );
    };
    const stopBeside = async (id: string) => {
      const made = beside.get(id);
      beside.delete(id);
      const runners = await made?.catch(() => []);
      await Promise.all((runners ?? []).map((runner) => runner.stop()));
    };
    const follow = (ids: string[]) => {
      if (stopped) return;
      const wanted = new Set(ids);
      for (const id of wanted) if (!beside.has(id)) startBeside(id);
      for (const id of beside.keys()) if (!wanted.has(id)) void stopBeside(id);
    };
    const members = async () =>
      (await options.store.ofDatabase(sync.id)).map((m) => ({
        syncId: m.id,
        accountId: m.accountId,
        schema: m.schema,
        rules: options.kinds.get(m.kind).events,
      }));
    const decoder = new Decoder({
      syncId: sync.id,
      accountId: sync.accountId,
      members,
      onMembers: follow,
      databaseUrl: await options.syncService.adminUrl(sync),
      slot: sync.databaseName,
      control: options.control,
      bus: options.bus,
      rules: options.kinds.get(sync.kind).events,
      logger,
      partitions: options.partitions,
      pools,
      active: async () => (await options.store.get(sync.id))?.state === 'active',
      ...options.tunables,
    });
    // The first sync's own delivery is ready before the lease counts as taken, as before.
    const own = await Promise.all((options.alongside ?? []).map((make) => make(syncId)));
    beside.set(syncId, Promise.resolve(own));
    let timer: NodeJS.Timeout | undefined;
    return {
      start: () => {
        decoder.start();
        for (const other of own) other.start();
        timer = setInterval(() => {
          members().then(
            (listed) => follow(listed.map((m) => m.syncId)),
            (err: unknown) => logger.debug({ err: toError(err) }, 'could not list the syncs of the database'),
          );
        }, options.followMs ?? 30_000);
        timer.unref();
      },
      stop: async () => {
        stopped = true;
        clearInterval(timer);
        await Promise.all([...beside.keys()].map((id) => stopBeside(id)));
        await decoder.stop();
      },
    };
  };
}
