import type pg from 'pg';
import type { SyncService } from '../control/sync-service.ts';
import type { SyncStore } from '../control/syncs.ts';
import type { EventBus } from '../events/bus.ts';
import type { Logger } from '../log.ts';
import { stripeTables, UPCOMING } from '../stripe/tables.ts';
import type { Runner } from '../lease/worker.ts';
import type { CollectionRules } from './events.ts';
import { Decoder, type DecoderOptions } from './stream.ts';

/** Tables of Tributary's own (`_sync_meta`) are bookkeeping, not records: no events. */
const isOwnTable = (table: string) => table.startsWith('_');

const airtableRules: CollectionRules = {
  collectionOf: (table) => (isOwnTable(table) ? undefined : table),
  keyOf: () => 'id',
};

const upcomingKeys = new Map<string, string>(Object.values(UPCOMING).map((u) => [u.table, u.key]));

/** Stripe collections are object types (`checkout.session`); the upcoming tables keep their names. */
const stripeRules: CollectionRules = {
  collectionOf: (table) => {
    if (isOwnTable(table)) return undefined;
    if (upcomingKeys.has(table)) return table;
    return stripeTables().get(table)?.object;
  },
  keyOf: (table) => upcomingKeys.get(table) ?? 'id',
};

export interface DecoderFactoryOptions {
  control: pg.Pool;
  store: SyncStore;
  syncService: SyncService;
  bus: EventBus;
  logger: Logger;
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
    if (!sync || sync.state !== 'active') throw new Error(`sync ${syncId} is not active`);
    const decoder = new Decoder({
      syncId: sync.id,
      accountId: sync.accountId,
      databaseUrl: await options.syncService.adminUrl(sync),
      slot: sync.databaseName,
      control: options.control,
      bus: options.bus,
      rules: sync.kind === 'stripe' ? stripeRules : airtableRules,
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
