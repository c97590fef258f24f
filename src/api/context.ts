import type pg from 'pg';
import type { AccountStore } from '../control/accounts.ts';
import type { SyncService } from '../control/sync-service.ts';
import type { SyncStore } from '../control/syncs.ts';
import type { Logger } from '../log.ts';
import type { Authenticator } from './auth.ts';
import type { EventEndpoints } from './views.ts';

/** Everything the management API needs, handed in once by main.ts. */
export interface ApiOptions {
  pool: pg.Pool;
  accounts: AccountStore;
  syncs: SyncStore;
  syncService: SyncService;
  authenticate: Authenticator;
  events: EventEndpoints;
  logger: Logger;
  bodyLimit?: number;
}
