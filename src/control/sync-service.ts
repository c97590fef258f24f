import { pause } from '../time.ts';
import { TributaryError } from '../errors.ts';
import { newDatabaseName, newPassword, newSyncId } from '../ids.ts';
import type { KindContext, SourceKind, UpstreamFacts } from '../kinds/kind.ts';
import { kindSchemaOf, type SourceKinds } from '../kinds/registry.ts';
import type { Logger } from '../log.ts';
import { ident, withClient, withCredentials, withDatabase } from '../db/sql.ts';
import { publicOnly, unmarked } from '../db/connect.ts';
import { hashToken } from './secrets.ts';
import { AttemptLimiter, checkServerUrl, type ServerUrlPolicy } from './server-url.ts';
import {
  checkServer,
  dropDatabase,
  dropSchema,
  lockRole,
  provisionDatabase,
  provisionSchema,
  type ReaderCheck,
  restoreReaderRole,
  type SyncDatabase,
} from './provisioner.ts';
import { PUBLIC_SCHEMAS, schemaNameProblem, schemasOf } from '../syncdb/schemas.ts';
import type { ReaderLimits } from './reader-limits.ts';
import type { SyncKind, SyncSettings } from './settings.ts';
import type { ServerPool, ServerTarget } from './servers.ts';
import type { NewSync, SyncRecord, SyncStore } from './syncs.ts';
import { settingsOnly } from '../kinds/kind.ts';
import { issuesText } from '../validation.ts';

export interface CreateSyncInput {
  accountId: string;
  kind: SyncKind;
  baseId: string | null;
  apiKey: string;
  settings: Partial<SyncSettings>;
  databaseUrl: string | null;
  /** The pool region to place the database in; null: the default region (ignored with databaseUrl). */
  region?: string | null;
  /** Another sync of the account whose database this one joins, in schema `schema` (operator only; not with databaseUrl or region). */
  databaseOf?: string | null;
  schema?: string | null;
}

/** What a sync kind adds at creation; the Airtable and Stripe parts plug in here. */

export interface SyncServiceOptions {
  store: SyncStore;
  /** The pool of servers that hold sync databases: where each sync's server is reached. */
  servers: ServerPool;
  /** The region a sync goes to when it names none. */
  defaultRegion: string;
  /** Host name handed out in database URLs for the configured server (for a server bound to a wildcard). */
  publicHost?: string;
  /**
   * The kinds of sync: their settings, the check of a key before a sync is made, and what a
   * new sync database needs before the sync is announced (so a proxied write right after the
   * 201 has somewhere to go).
   */
  kinds: SourceKinds;
  /** What a kind's check may use: the upstream's base URL, the quota. Absent (tests of other parts): no check. */
  kindContext?: (kind: SourceKind) => KindContext;
  /** What a customer-owned server URL must be (server-url.ts); absent: shape checks only, private allowed. */
  serverUrlPolicy?: ServerUrlPolicy;
  /** Removes what a sync made upstream (Airtable's webhook); failures are logged, not fatal. */
  upstreamCleanup?: (sync: SyncRecord) => Promise<void>;
  logger: Logger;
}

/** How long a delete waits for the sync's work to stop before it drops the database anyway. */
const RELEASE_WAIT_MS = 10_000;

export class SyncService {
  private readonly serverAttempts = new AttemptLimiter();

  constructor(private readonly options: SyncServiceOptions) {}

  private get serverUrlPolicy(): ServerUrlPolicy {
    return this.options.serverUrlPolicy ?? { allowPrivate: true, ownServers: [] };
  }

  /** A customer server's URL as Tributary connects to it: at public addresses only, unless the operator allows others. */
  private pinned(url: string): string {
    return this.serverUrlPolicy.allowPrivate ? url : publicOnly(url);
  }

  /**
   * The sync whose database a new one joins (`database_of`), checked before anything else is
   * asked: one of the same account that holds a database of its own (naming a sync that
   * shares one names that sync's first). Another account's sync answers exactly like a
   * missing one.
   */
  private async sharedTarget(input: CreateSyncInput, kind: SourceKind): Promise<NewSync['shared']> {
    if (!input.databaseOf) return undefined;
    const schema = input.schema ?? '';
    const problem = schemaNameProblem(schema);
    if (problem) throw new TributaryError('unprocessable', `schema: ${problem}`);
    if (!kind.sharesDatabase)
      throw new TributaryError('unprocessable', `database_of: ${kind.name} syncs cannot share another sync's database; each needs its own`);
    const missing = () => new TributaryError('unprocessable', `database_of: no sync ${input.databaseOf} in this account`);
    let of = await this.options.store.get(input.databaseOf);
    if (of?.state !== 'active' || of.accountId !== input.accountId) throw missing();
    if (of.databaseOf !== null) of = await this.options.store.get(of.databaseOf);
    if (of?.state !== 'active' || of.accountId !== input.accountId) throw missing();
    return { of, schema };
  }

  async create(input: CreateSyncInput): Promise<SyncRecord> {
    const { store, logger } = this.options;
    const kind = this.options.kinds.get(input.kind);
    const settings: SyncSettings = { ...kind.settings.defaults, ...input.settings };
    const apiKeySha256 = kind.keyNamesAccount ? hashToken(input.apiKey) : null;
    const shared = await this.sharedTarget(input, kind);
    await store.precheck({
      accountId: input.accountId,
      kind: input.kind,
      baseId: input.baseId,
      upstreamAccountId: null,
      apiKeySha256,
      shared,
      describeUpstream: kind.describeUpstream,
    });
    if (shared) return this.createShared(input, kind, settings, apiKeySha256, shared);
    const region = input.databaseUrl === null ? (input.region ?? this.options.defaultRegion) : null;
    if (region !== null) await this.options.servers.precheck(region);
    if (input.databaseUrl !== null) {
      this.serverAttempts.take(input.accountId);
      // Every pool member is Tributary's own: never a customer's, so the check is no password oracle for them.
      const policy = this.serverUrlPolicy;
      await checkServerUrl(input.databaseUrl, { ...policy, ownServers: [...policy.ownServers, ...(await this.options.servers.urls())] });
      await checkServer(this.pinned(input.databaseUrl));
    }
    const checked: UpstreamFacts = this.options.kindContext ? await kind.check(input, this.options.kindContext(kind)) : {};

    const databaseName = newDatabaseName();
    let record: SyncRecord;
    try {
      record = await store.insert({
        id: newSyncId(),
        accountId: input.accountId,
        kind: input.kind,
        baseId: input.baseId,
        upstreamAccountId: checked.upstreamAccountId ?? null,
        apiKey: input.apiKey,
        settings,
        databaseName,
        databaseRole: `${databaseName}_ro`,
        databasePassword: newPassword(),
        customServerUrl: input.databaseUrl,
        region,
        upstreamName: checked.upstreamName ?? null,
        warnings: checked.warnings ?? [],
        // One Stripe key, one sync per account (without an account id, the key is all there is to compare).
        apiKeySha256,
        describeUpstream: kind.describeUpstream,
      });
    } catch (error) {
      if ((error as { code?: string }).code === '23505') {
        throw new TributaryError('conflict', `this account already has a sync of base ${input.baseId}`);
      }
      throw error;
    }

    // The row exists before the database: a crash from here on leaves a row in state
    // `provisioning`, which the reconciler removes together with whatever was built.
    try {
      const db = await this.database(record);
      const password = (await store.databasePassword(record.id)).reveal();
      const prepare = kind.prepareDatabase && ((url: string) => kind.prepareDatabase!(url, logger, PUBLIC_SCHEMAS));
      // A pool server keeps a template of the kind (unless the kind's preparation cannot run twice);
      // a customer's server gets nothing of ours but the sync's database.
      const templated = !input.databaseUrl && (!kind.prepareDatabase || kind.templateVersion);
      const template = templated ? { kind: kind.name, version: kind.templateVersion?.() ?? '', prepare } : undefined;
      await provisionDatabase(db, password, logger, record.readerConnectionLimit, kindSchemaOf(kind), record.readerLimits, template);
      // On a copy, what a stale template lacks.
      await prepare?.(withDatabase(db.adminUrl, db.name));
      await store.setState(record.id, 'active');
    } catch (cause) {
      logger.error({ err: cause, sync: record.id }, 'provisioning failed; cleaning up');
      await this.destroy(record).catch((err: unknown) => logger.error({ err, sync: record.id }, 'cleanup failed'));
      throw new TributaryError('unavailable', 'the sync database could not be created; nothing was kept', { cause, expose: true });
    }
    logger.info({ sync: record.id, kind: record.kind, database: record.databaseName }, 'sync created');
    return { ...record, state: 'active' };
  }

  /** The rest of create() for a sync in a schema of another's database (sharedTarget). */
  private async createShared(
    input: CreateSyncInput,
    kind: SourceKind,
    settings: SyncSettings,
    apiKeySha256: string | null,
    shared: NonNullable<NewSync['shared']>,
  ): Promise<SyncRecord> {
    const { store, logger } = this.options;
    const checked: UpstreamFacts = this.options.kindContext ? await kind.check(input, this.options.kindContext(kind)) : {};
    const record = await this.insertOrConflict(input, {
      id: newSyncId(),
      accountId: input.accountId,
      kind: input.kind,
      baseId: input.baseId,
      upstreamAccountId: checked.upstreamAccountId ?? null,
      apiKey: input.apiKey,
      settings,
      databaseName: shared.of.databaseName,
      databaseRole: shared.of.databaseRole,
      databasePassword: '',
      customServerUrl: null,
      region: null,
      shared,
      upstreamName: checked.upstreamName ?? null,
      warnings: checked.warnings ?? [],
      apiKeySha256,
      describeUpstream: kind.describeUpstream,
    });
    const schemas = schemasOf(record.schema);
    try {
      const db = await this.database(record);
      await provisionSchema(db, schemas, kindSchemaOf(kind), logger);
      await kind.prepareDatabase?.(withDatabase(db.adminUrl, db.name), logger, schemas);
      await store.setState(record.id, 'active');
    } catch (cause) {
      // A schema the database already had is not ours to drop: only the row goes.
      if (cause instanceof TributaryError && cause.code === 'conflict') {
        await store.remove(record.id);
        throw cause;
      }
      logger.error({ err: cause, sync: record.id }, 'provisioning failed; cleaning up');
      await this.destroy(record).catch((err: unknown) => logger.error({ err, sync: record.id }, 'cleanup failed'));
      throw new TributaryError('unavailable', 'the sync schema could not be created; nothing was kept', { cause, expose: true });
    }
    logger.info({ sync: record.id, kind: record.kind, database: record.databaseName, schema: record.schema, database_of: record.databaseOf }, 'sync created');
    return { ...record, state: 'active' };
  }

  private async insertOrConflict(input: CreateSyncInput, sync: Parameters<SyncStore['insert']>[0]): Promise<SyncRecord> {
    try {
      return await this.options.store.insert(sync);
    } catch (error) {
      if ((error as { code?: string }).code === '23505') {
        throw new TributaryError('conflict', `this account already has a sync of base ${input.baseId}`);
      }
      throw error;
    }
  }

  async updateSettings(record: SyncRecord, patch: unknown): Promise<SyncRecord> {
    const kind = this.options.kinds.get(record.kind);
    const parsed = kind.settings.schema.partial().strict(settingsOnly(kind)).safeParse(patch);
    // "settings.turbo: Expected boolean", or "settings.lookup_as: not a setting of stripe syncs (…)".
    if (!parsed.success) throw new TributaryError('invalid_request', issuesText(parsed.error.issues.map((i) => ({ ...i, path: ['settings', ...i.path] }))));
    const updated = await this.options.store.updateSettings(record.id, { ...record.settings, ...parsed.data });
    if (!updated) throw new TributaryError('conflict', 'the sync is being created or deleted');
    return updated;
  }

  async delete(record: SyncRecord, keepDatabase: boolean): Promise<void> {
    // Marked first, so a crash mid-way is finished by the reconciler rather than forgotten;
    // a database other syncs still use is refused in the same step (SyncStore.markDeleting).
    await this.options.store.markDeleting(record.id, keepDatabase);
    // The sync's runner and decoder stop when their workers see it is being deleted (a tick,
    // 2 s by default): its database is dropped after that, not under them. A worker that died
    // holds its lease until it lapses; the delete waits RELEASE_WAIT_MS at most.
    const until = Date.now() + RELEASE_WAIT_MS;
    while (Date.now() < until && !(await this.options.store.released(record.id))) await pause(100);
    // Only then what it made upstream: a runner still at work could register a webhook after a
    // cleanup that found none, and leave it behind (stripe.connect-push, a delete just after
    // the setting was turned on).
    await this.options
      .upstreamCleanup?.(record)
      .catch((err: unknown) => this.options.logger.warn({ err, sync: record.id }, 'upstream cleanup failed; continuing the delete'));
    await this.destroy({ ...record, keepDatabase });
    this.options.logger.info({ sync: record.id, keepDatabase }, 'sync deleted');
  }

  /** Finishes creates and deletes that a crash interrupted. */
  async reconcile(): Promise<number> {
    const { store, logger } = this.options;
    const stuck = [...(await store.listInState('provisioning')), ...(await store.listInState('deleting'))];
    for (const record of stuck) {
      logger.warn({ sync: record.id, state: record.state }, 'finishing an interrupted create or delete');
      await this.destroy(record);
    }
    return stuck.length;
  }

  /** The URL users get: the sync's database, logged in as its read-only role. */
  async readerUrl(record: SyncRecord): Promise<string> {
    const server = await this.serverOf(record);
    let url = withDatabase(server.url, record.databaseName);
    if (server.configured && this.options.publicHost) {
      const parsed = new URL(url);
      parsed.hostname = this.options.publicHost;
      url = parsed.toString();
    }
    return withCredentials(unmarked(url), record.databaseRole, (await this.options.store.databasePassword(record.id)).reveal());
  }

  /** A sync in another's database has that sync's reader: its limits are set there. */
  private ownReader(record: SyncRecord, field: string): void {
    if (record.databaseOf !== null) {
      throw new TributaryError(
        'conflict',
        `${field}: sync ${record.id} reads through the reader of sync ${record.databaseOf}, whose database it shares; set it there`,
      );
    }
  }

  /** The operator's CONNECTION LIMIT for the sync's reader, within its account's budget. */
  async setReaderConnectionLimit(record: SyncRecord, limit: number): Promise<void> {
    this.ownReader(record, 'reader_connection_limit');
    const db = await this.database(record);
    await this.options.store.setReaderConnectionLimit(record, limit, () =>
      withClient(db.adminUrl, async (admin) => {
        await lockRole(admin, db.role);
        await admin.query(`ALTER ROLE ${ident(db.role)} CONNECTION LIMIT ${Math.trunc(limit)}`);
      }),
    );
    this.options.logger.info({ sync: record.id, reader_connection_limit: limit }, 'reader connection limit changed');
  }

  /**
   * The operator's limits for the sync's reader (reader-limits.ts); those not given keep their
   * values. They apply to the reader's new connections.
   */
  async setReaderLimits(record: SyncRecord, patch: { [K in keyof ReaderLimits]?: number | undefined }): Promise<SyncRecord> {
    this.ownReader(record, 'reader limits');
    const given = Object.fromEntries(Object.entries(patch).filter(([, value]) => value !== undefined));
    const db = await this.database(record);
    const password = (await this.options.store.databasePassword(record.id)).reveal();
    const updated = await this.options.store.setReaderLimits(record.id, { ...record.readerLimits, ...given }, async (limits) => {
      await restoreReaderRole(db, password, limits);
    });
    if (!updated) throw new TributaryError('conflict', 'the sync is being created or deleted');
    this.options.logger.info({ sync: record.id, reader_limits: updated.readerLimits }, 'reader limits changed');
    return updated;
  }

  /**
   * Puts the sync's read-only role back as provisioned, with the limits the control database
   * has now (the caller's record may be older), and ends its statements and idle transactions
   * that outlived them (restoreReaderRole).
   */
  async restoreReader(record: SyncRecord): Promise<ReaderCheck> {
    const current = (await this.options.store.get(record.id)) ?? record;
    return restoreReaderRole(await this.database(current), (await this.options.store.databasePassword(record.id)).reveal(), current.readerLimits);
  }

  /** Admin URL of the sync's own database, for the parts that write to it. */
  async adminUrl(record: SyncRecord): Promise<string> {
    const db = await this.database(record);
    return withDatabase(db.adminUrl, db.name);
  }

  /**
   * The one place a sync's server is resolved, for every part that connects to its database
   * (provisioner, sync runner, decoder, proxy write-through, console reads, reader guard, wait):
   * a customer-owned server's sealed URL, checked at each connection unless private servers are
   * allowed; else the pool member named by the sync's server_id.
   */
  private async serverOf(record: SyncRecord): Promise<ServerTarget> {
    if (record.customServer) {
      const custom = await this.options.store.customServerUrl(record.id);
      if (!custom) throw new Error(`sync ${record.id} has no customer-owned server`);
      return { url: this.pinned(custom.reveal()), configured: false };
    }
    return this.options.servers.target(record.serverId);
  }

  private async database(record: SyncRecord): Promise<SyncDatabase> {
    return { adminUrl: (await this.serverOf(record)).url, name: record.databaseName, role: record.databaseRole };
  }

  private async destroy(record: SyncRecord): Promise<void> {
    if (record.databaseOf !== null) {
      // Only its schemas: the database, its reader and its slot are the first sync's.
      await dropSchema(await this.database(record), schemasOf(record.schema), { keepSchema: record.keepDatabase }, this.options.logger);
    } else {
      await dropDatabase(await this.database(record), { keepDatabase: record.keepDatabase }, this.options.logger);
    }
    await this.options.store.remove(record.id);
  }
}
