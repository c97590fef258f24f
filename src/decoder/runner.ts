import type pg from 'pg';
import type { SyncService } from '../control/sync-service.ts';
import type { SyncStore } from '../control/syncs.ts';
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
  tunables?: Pick<DecoderOptions, 'flushMs' | 'maxBatch' | 'retryMs' | 'lagReportMs'>;
  /** Whatever else runs per sync beside its decoder (the Kafka relay, webhook delivery). */
  alongside?: Array<(syncId: string) => Promise<Runner>>;
}

/** The decoder of one sync, and what else reads its events, as one leased unit. */
export function decoderFactory(options: DecoderFactoryOptions): (syncId: string) => Promise<Runner> {
  return async (syncId) => {
    const sync = await options.store.get(syncId);
    if (sync?.state !== 'active') throw new Error(`sync ${syncId} is not active`);
    const decoder = new Decoder({
      syncId: sync.id,
      accountId: sync.accountId,
      databaseUrl: await options.syncService.adminUrl(sync),
      slot: sync.databaseName,
      control: options.control,
      bus: options.bus,
      rules: options.kinds.get(sync.kind).events,
      logger: options.logger.child({ sync: sync.id }),
      partitions: options.partitions,
      ...options.tunables,
    });
    const others = await Promise.all((options.alongside ?? []).map((make) => make(syncId)));
    return {
      start: () => {
        decoder.start();
        for (const other of others) other.start();
      },
      stop: async () => {
        await Promise.all(others.map((other) => other.stop()));
        await decoder.stop();
      },
    };
  };
}
