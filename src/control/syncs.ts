import { inTransaction } from '../db/sql.ts';
import { TributaryError } from '../errors.ts';
import type pg from 'pg';
import { hashToken, type Secret, type SecretBox } from './secrets.ts';
import type { ReaderLimits } from './reader-limits.ts';
import { placeSync } from './servers.ts';
import { type Admission, accountLimits, admit, lockedAccountLimits } from './sync-admission.ts';
import type { SyncKind, SyncSettings } from './settings.ts';
import type { SyncStatusFields } from './status-fields.ts';
import { columns, type SyncRow, toRecord } from './sync-rows.ts';

/** Notified with a sync's id once it is ready to run: a hint, since workers also claim at each tick. */
export const SYNC_READY_CHANNEL = 'tributary_sync_ready';

export type SyncState = 'provisioning' | 'active' | 'deleting';

export interface SyncRecord {
  id: string;
  accountId: string;
  kind: SyncKind;
  baseId: string | null;
  upstreamAccountId: string | null;
  settings: SyncSettings;
  state: SyncState;
  keepDatabase: boolean;
  databaseName: string;
  databaseRole: string;
  /** The schema of its tables in that database: `public`, or its own when it shares another sync's database. */
  schema: string;
  /** The sync whose database (reader, server, slot) this one shares; null when it made its own. */
  databaseOf: string | null;
  /** True when the database lives on a customer-owned server rather than a pool server. */
  customServer: boolean;
  /** The pool server that holds the database (null on a customer-owned server). */
  serverId: string | null;
  /** That server's region (null on a customer-owned server). */
  region: string | null;
  status: SyncStatusFields;
  /** The base's or the Stripe account's name upstream, once known. */
  upstreamName: string | null;
  /** What the creation check found the key cannot read. */
  warnings: string[];
  /** Where the sync's decoder stands: events logged so far, WAL bytes the slot is behind. */
  decoder: { eventsLogged: number; slotLagBytes: number | null };
  /** The reader role's CONNECTION LIMIT (counted against the account's budget). */
  readerConnectionLimit: number;
  /** What the reader's statements may take of the server (reader-limits.ts). */
  readerLimits: ReaderLimits;
  createdAt: Date;
  updatedAt: Date;
}

export interface NewSync {
  id: string;
  accountId: string;
  kind: SyncKind;
  baseId: string | null;
  upstreamAccountId: string | null;
  apiKey: string;
  settings: SyncSettings;
  databaseName: string;
  databaseRole: string;
  databasePassword: string;
  customServerUrl: string | null;
  /** Without a customer-owned server, the region whose pool places the database (placeSync). */
  region: string | null;
  /** A sync whose database this one joins, in schema `schema` (its server and reader are that sync's). */
  shared?: { of: SyncRecord; schema: string };
  upstreamName: string | null;
  warnings?: string[];
  /** SHA-256 of the upstream key (Stripe: a second sync of one key in one account is refused). */
  apiKeySha256?: string | null;
}

/** Associated data binds each sealed value to its row and column. */
const aad = (id: string, column: string) => `syncs:${id}:${column}`;

export class SyncStore {
  constructor(
    private readonly pool: pg.Pool,
    private readonly box: SecretBox,
  ) {}

  /**
   * Inserts a sync within its account's limits, decided under a lock on the account so two
   * creates cannot both take the last place: a second sync of the same upstream (Airtable base,
   * Stripe account or key) is a 409 naming the first; so is one past the account's `max_syncs`,
   * or one whose reader would overdraw the account's connection budget. The reader gets
   * DEFAULT_READER_CONNECTIONS, or what is left of the budget if less.
   */
  /**
   * The same limits, read without the lock, before anything is asked of the upstream: a
   * refused sync costs no upstream request and no database_url check. insert() decides again.
   */
  async precheck(sync: Admission): Promise<void> {
    await admit(this.pool, await accountLimits(this.pool, sync.accountId), sync);
  }

  async insert(sync: NewSync & Pick<Admission, 'describeUpstream'>): Promise<SyncRecord> {
    return inTransaction(this.pool, async (tx) => {
      const readerLimit = await admit(tx, await lockedAccountLimits(tx, sync.accountId), sync);
      if (sync.shared) return this.insertShared(tx, sync, sync.shared);
      // A pool server is chosen last, under the region's lock, and only for a sync admitted.
      let serverId: string | null = null;
      if (sync.customServerUrl === null) {
        if (sync.region === null) throw new Error('a sync needs a region or a customer-owned server');
        serverId = await placeSync(tx, sync.region);
      }
      const { rows } = await tx.query<SyncRow>(
        `INSERT INTO syncs (id, account_id, kind, base_id, upstream_account_id, api_key_enc, settings,
           database_name, database_role, database_password_enc, database_server_enc, upstream_name, upstream_warnings,
           reader_connection_limit, api_key_sha256, credential_sha256, server_id)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)
         RETURNING ${columns}`,
        [
          sync.id,
          sync.accountId,
          sync.kind,
          sync.baseId,
          sync.upstreamAccountId,
          this.box.encrypt(sync.apiKey, aad(sync.id, 'api_key')),
          JSON.stringify(sync.settings),
          sync.databaseName,
          sync.databaseRole,
          this.box.encrypt(sync.databasePassword, aad(sync.id, 'database_password')),
          sync.customServerUrl === null ? null : this.box.encrypt(sync.customServerUrl, aad(sync.id, 'database_server')),
          sync.upstreamName,
          sync.warnings ?? [],
          readerLimit,
          sync.apiKeySha256 ?? null,
          hashToken(sync.apiKey),
          serverId,
        ],
      );
      return toRecord(rows[0]!);
    });
  }

  /**
   * A sync in a schema of another sync's database: that sync's server, database, reader role
   * and password (sealed again for this row), no reader connections of its own, no server
   * capacity taken. The first sync is locked against a concurrent delete and must still be
   * active; a schema name already held in the database is a 409 (the unique index decides).
   */
  private async insertShared(tx: pg.PoolClient, sync: NewSync, shared: { of: SyncRecord; schema: string }): Promise<SyncRecord> {
    const { rows: first } = await tx.query<{ state: SyncState; database_password_enc: string; database_server_enc: string | null; server_id: string | null }>(
      `SELECT state, database_password_enc, database_server_enc, server_id FROM syncs WHERE id = $1 AND account_id = $2 AND database_of IS NULL FOR SHARE`,
      [shared.of.id, sync.accountId],
    );
    if (first[0]?.state !== 'active')
      throw new TributaryError('unprocessable', `database_of: no sync ${shared.of.id} in this account holds a database of its own`);
    const reseal = (sealed: string, column: string) => this.box.encrypt(this.box.decrypt(sealed, aad(shared.of.id, column)).reveal(), aad(sync.id, column));
    try {
      const { rows } = await tx.query<SyncRow>(
        `INSERT INTO syncs (id, account_id, kind, base_id, upstream_account_id, api_key_enc, settings,
           database_name, database_role, database_password_enc, database_server_enc, upstream_name, upstream_warnings,
           reader_connection_limit, api_key_sha256, credential_sha256, server_id, schema, database_of,
           reader_statement_timeout_ms, reader_idle_in_transaction_timeout_ms, reader_temp_file_limit_mb)
         SELECT $1, $2, $3, $4, $5, $6, $7, f.database_name, f.database_role, $8, $9, $10, $11, 0, $12, $13, f.server_id, $14, f.id,
                f.reader_statement_timeout_ms, f.reader_idle_in_transaction_timeout_ms, f.reader_temp_file_limit_mb
           FROM syncs f WHERE f.id = $15
         RETURNING ${columns}`,
        [
          sync.id,
          sync.accountId,
          sync.kind,
          sync.baseId,
          sync.upstreamAccountId,
          this.box.encrypt(sync.apiKey, aad(sync.id, 'api_key')),
          JSON.stringify(sync.settings),
          reseal(first[0].database_password_enc, 'database_password'),
          first[0].database_server_enc === null ? null : reseal(first[0].database_server_enc, 'database_server'),
          sync.upstreamName,
          sync.warnings ?? [],
          sync.apiKeySha256 ?? null,
          hashToken(sync.apiKey),
          shared.schema,
          shared.of.id,
        ],
      );
      return toRecord(rows[0]!);
    } catch (error) {
      if ((error as { constraint?: string }).constraint === 'syncs_database_schema_idx') {
        throw new TributaryError('conflict', `schema: ${shared.schema} is taken in the database of sync ${shared.of.id}`);
      }
      throw error;
    }
  }

  /** The active syncs whose tables are in one database: the one that made it and those sharing it. */
  async ofDatabase(firstId: string): Promise<SyncRecord[]> {
    const { rows } = await this.pool.query<SyncRow>(
      `SELECT ${columns} FROM syncs WHERE (id = $1 OR database_of = $1) AND state = 'active' ORDER BY database_of NULLS FIRST, id`,
      [firstId],
    );
    return rows.map(toRecord);
  }

  /**
   * The operator sets a reader's CONNECTION LIMIT: within the account's budget (with the other
   * readers' limits), decided under the account's lock; `apply` changes the role itself before
   * the row records it.
   */
  async setReaderConnectionLimit(sync: SyncRecord, limit: number, apply: () => Promise<void>): Promise<void> {
    await inTransaction(this.pool, async (tx) => {
      const { budget, used: others } = (await lockedAccountLimits(tx, sync.accountId, sync.id))!;
      if (others + limit > budget) {
        throw new TributaryError(
          'conflict',
          `reader_connection_limit: the account's other readers hold ${others} of its budget of ${budget}; at most ${Math.max(0, budget - others)} is left`,
        );
      }
      await apply();
      await tx.query('UPDATE syncs SET reader_connection_limit = $2, updated_at = now() WHERE id = $1', [sync.id, limit]);
    });
  }

  /**
   * The operator changes a reader's limits; `apply` puts them on the role before the row records
   * them (both or neither). Undefined when the sync is being created or deleted.
   */
  async setReaderLimits(id: string, limits: ReaderLimits, apply: (limits: ReaderLimits) => Promise<void>): Promise<SyncRecord | undefined> {
    return inTransaction(this.pool, async (tx) => {
      const { rows } = await tx.query<SyncRow>(
        `UPDATE syncs SET reader_statement_timeout_ms = $2, reader_idle_in_transaction_timeout_ms = $3, reader_temp_file_limit_mb = $4,
                updated_at = now()
          WHERE id = $1 AND state = 'active' RETURNING ${columns}`,
        [id, limits.statementTimeoutMs, limits.idleInTransactionTimeoutMs, limits.tempFileLimitMb],
      );
      const record = rows[0] && toRecord(rows[0]);
      if (record) await apply(record.readerLimits);
      return record;
    });
  }

  async get(id: string): Promise<SyncRecord | undefined> {
    const { rows } = await this.pool.query<SyncRow>(`SELECT ${columns} FROM syncs WHERE id = $1`, [id]);
    return rows[0] && toRecord(rows[0]);
  }

  /**
   * All syncs, or one account's: the active ones, which are the ones that can be opened (a
   * sync still being created, or being deleted, answers 404 by id).
   */
  async list(accountId?: string): Promise<SyncRecord[]> {
    const { rows } = await this.pool.query<SyncRow>(
      `SELECT ${columns} FROM syncs
        WHERE state = 'active' AND ($1::text IS NULL OR account_id = $1)
        ORDER BY created_at, id`,
      [accountId ?? null],
    );
    return rows.map(toRecord);
  }

  async listInState(state: SyncState): Promise<SyncRecord[]> {
    const { rows } = await this.pool.query<SyncRow>(`SELECT ${columns} FROM syncs WHERE state = $1`, [state]);
    return rows.map(toRecord);
  }

  async setState(id: string, state: SyncState, keepDatabase = false): Promise<void> {
    // A sync ready to run: lease workers claim it now rather than at their next tick.
    await this.pool.query(
      `WITH u AS (UPDATE syncs SET state = $2, keep_database = $3, updated_at = now() WHERE id = $1 RETURNING state)
       SELECT pg_notify('${SYNC_READY_CHANNEL}', $1) FROM u WHERE u.state = 'active'`,
      [id, state, keepDatabase],
    );
  }

  /**
   * Marks a sync for deletion, unless other syncs still have their tables in its database:
   * then a 409 names them. The row is locked first, so a sync joining the database at the same
   * moment (insertShared locks it too) is either seen here or refused there.
   */
  async markDeleting(id: string, keepDatabase: boolean): Promise<void> {
    await inTransaction(this.pool, async (tx) => {
      await tx.query('SELECT 1 FROM syncs WHERE id = $1 FOR UPDATE', [id]);
      const { rows } = await tx.query<{ id: string; schema: string }>('SELECT id, schema FROM syncs WHERE database_of = $1 ORDER BY id', [id]);
      if (rows.length > 0) {
        const names = rows.map((r) => `${r.id} (schema ${r.schema})`).join(', ');
        throw new TributaryError('conflict', `other syncs still use this sync's database: ${names}; delete them first`);
      }
      await tx.query('UPDATE syncs SET state = $2, keep_database = $3, updated_at = now() WHERE id = $1', [id, 'deleting', keepDatabase]);
    });
  }

  /** Whether no process holds the sync's work (its runner, its decoder) any more. */
  async released(id: string): Promise<boolean> {
    const { rows } = await this.pool.query<{ free: boolean }>(
      `SELECT (lease_owner IS NULL OR lease_until < now()) AND (decoder_lease_owner IS NULL OR decoder_lease_until < now()) AS free
         FROM syncs WHERE id = $1`,
      [id],
    );
    return rows[0]?.free ?? true;
  }

  async updateSettings(id: string, settings: SyncSettings): Promise<SyncRecord | undefined> {
    const { rows } = await this.pool.query<SyncRow>(
      `UPDATE syncs SET settings = $2, updated_at = now() WHERE id = $1 AND state = 'active' RETURNING ${columns}`,
      [id, JSON.stringify(settings)],
    );
    return rows[0] && toRecord(rows[0]);
  }

  /** The sync and its topics go; its logged events become unreachable and age out with retention. */
  async remove(id: string): Promise<void> {
    await inTransaction(this.pool, async (client) => {
      await client.query('DELETE FROM event_topics WHERE sync_id = $1', [id]);
      await client.query('DELETE FROM decoder_progress WHERE sync_id = $1', [id]);
      await client.query('DELETE FROM syncs WHERE id = $1', [id]);
    });
  }

  /**
   * Records the key digests of syncs made before they were kept, at start, once: the
   * account-naming one of `kinds` (migration 13), and every kind's credential digest, by
   * which the proxy knows a sync's own credential (migration 16).
   */
  async fillKeyDigests(kinds: string[]): Promise<number> {
    const { rows } = await this.pool.query<{ id: string; names_account: boolean }>(
      `SELECT id, kind = ANY($1) AS names_account FROM syncs
        WHERE state = 'active' AND (credential_sha256 IS NULL OR (kind = ANY($1) AND api_key_sha256 IS NULL))`,
      [kinds],
    );
    for (const { id, names_account } of rows) {
      const digest = hashToken((await this.apiKey(id)).reveal());
      await this.pool.query(`UPDATE syncs SET credential_sha256 = $2, api_key_sha256 = CASE WHEN $3 THEN $2 ELSE api_key_sha256 END WHERE id = $1`, [
        id,
        digest,
        names_account,
      ]);
    }
    return rows.length;
  }

  async apiKey(id: string): Promise<Secret> {
    return this.box.decrypt(await this.column(id, 'api_key_enc'), aad(id, 'api_key'));
  }

  async databasePassword(id: string): Promise<Secret> {
    return this.box.decrypt(await this.column(id, 'database_password_enc'), aad(id, 'database_password'));
  }

  /** The customer-owned server's admin URL, or undefined for a pool server. */
  async customServerUrl(id: string): Promise<Secret | undefined> {
    const sealed = await this.column(id, 'database_server_enc');
    return sealed === null ? undefined : this.box.decrypt(sealed, aad(id, 'database_server'));
  }

  /** Keeps the hook the upstream signs the sync's notifications with (sql/24), sealed. */
  async saveHook(id: string, hookId: string, secret: string): Promise<void> {
    await this.pool.query('UPDATE syncs SET hook_id = $2, hook_secret_enc = $3 WHERE id = $1', [id, hookId, this.box.encrypt(secret, aad(id, 'hook_secret'))]);
  }

  /** The sync's kind and hook, or undefined for a sync that is not active or has none. */
  async hook(id: string): Promise<{ kind: string; hookId: string; secret: Secret } | undefined> {
    const { rows } = await this.pool.query<{ kind: string; hook_id: string; hook_secret_enc: string }>(
      "SELECT kind, hook_id, hook_secret_enc FROM syncs WHERE id = $1 AND state = 'active' AND hook_id IS NOT NULL",
      [id],
    );
    const row = rows[0];
    return row && { kind: row.kind, hookId: row.hook_id, secret: this.box.decrypt(row.hook_secret_enc, aad(id, 'hook_secret')) };
  }

  private async column(id: string, column: 'api_key_enc' | 'database_password_enc'): Promise<string>;
  private async column(id: string, column: 'database_server_enc'): Promise<string | null>;
  private async column(id: string, column: string): Promise<string | null> {
    const { rows } = await this.pool.query<Record<string, string | null>>(`SELECT ${column} AS v FROM syncs WHERE id = $1`, [id]);
    if (!rows[0]) throw new Error(`sync ${id} not found`);
    return rows[0].v ?? null;
  }
}
