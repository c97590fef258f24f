import type { WaitingList } from '../control/waiting-list.ts';
import type { BackfillLimits } from '../backfill/limits.ts';
import type { EventAccessHooks } from '../events/kafka/hooks.ts';
import type pg from 'pg';
import type { AccountStore } from '../control/accounts.ts';
import type { ServerPool } from '../control/servers.ts';
import type { SyncService } from '../control/sync-service.ts';
import type { SyncStore } from '../control/syncs.ts';
import type { StatusBounds } from '../control/status.ts';
import type { SourceKinds } from '../kinds/registry.ts';
import type { TenantCaps } from '../tenancy/limits.ts';
import type { TenantScope } from '../tenancy/scope.ts';
import type { Logger } from '../log.ts';
import type { Authenticator } from './auth.ts';
import type { SyncTables } from './sync-tables.ts';
import type { EventEndpoints } from './views.ts';

/** Everything the management API needs, handed in once by main.ts. */
export interface ApiOptions {
  pool: pg.Pool;
  accounts: AccountStore;
  syncs: SyncStore;
  syncService: SyncService;
  /** The kinds behind a waiting list, and who is on them (routes/waiting-list.ts); none when not given. */
  waitingList?: WaitingList;
  /** The pool of servers that hold sync databases (operator routes). */
  servers: ServerPool;
  /** The kinds of sync: how each names its tables' upstream and their events. */
  kinds: SourceKinds;
  authenticate: Authenticator;
  events: EventEndpoints;
  logger: Logger;
  bodyLimit?: number;
  /** Reverse proxies in front (Config.reverseProxies): whose X-Forwarded-For names the client. */
  reverseProxies?: number;
  /** The origin browsers use when it is not the server's own (Config.publicOrigin). */
  publicOrigin?: string;
  /** Told when accounts and syncs come and go (Kafka users and ACLs), when Kafka is on. */
  eventAccess?: EventAccessHooks;
  /** One account's open waits and costly reads (429 past them); createApiApp makes the defaults when not given. */
  caps?: TenantCaps;
  /** The request scope the control pool (FairPool) shares its connections by; createApiApp makes one when not given. */
  tenantScope?: TenantScope;
  /** Reads of the sync databases, shared and pooled (createApiApp makes one when not given). */
  syncTables?: SyncTables;
  /** The status rule's bounds, where a test shortened them (Tunables.status). */
  statusBounds?: Partial<StatusBounds>;
  /** What one account's backfills may do (the defaults when not given). */
  backfillLimits?: BackfillLimits;
}
