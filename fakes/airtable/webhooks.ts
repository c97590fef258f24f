import { createHmac, randomBytes } from 'node:crypto';
import { iso } from './cells-read.ts';
import { notFound, unprocessable } from './errors.ts';
import { randomId } from './ids.ts';
import type { World } from './model.ts';
import type { ChangeSet, TableChanges } from './transaction.ts';

const DATA_TYPES = new Set(['tableData', 'tableFields', 'tableMetadata']);
export const MAX_WEBHOOKS_PER_BASE = 10;
export const MAX_PAYLOADS_PER_PAGE = 50;

interface Specification {
  options: {
    filters: {
      dataTypes: string[];
      recordChangeScope?: string;
      fromSources?: string[];
      watchDataInFieldIds?: string[];
    };
    includes?: {
      includeCellValuesInFieldIds?: string[] | 'all';
      includePreviousCellValues?: boolean;
      includePreviousFieldDefinitions?: boolean;
    };
  };
}

interface StoredPayload {
  cursor: number;
  at: number;
  payload: Record<string, unknown>;
}

interface Webhook {
  id: string;
  baseId: string;
  macSecret: Buffer;
  notificationUrl: string | null;
  notificationsEnabled: boolean;
  specification: Specification;
  expirationTime: number;
  payloads: StoredPayload[];
  nextCursor: number;
  lastSuccessfulNotificationTime: string | null;
  lastNotificationResult: Record<string, unknown> | null;
  pingQueued: boolean;
}

export interface WebhookStoreOptions {
  webhookTtlMs: number;
  payloadTtlMs: number;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const bad = (message: string) => unprocessable('INVALID_REQUEST_UNKNOWN', `Invalid request: ${message}`);

function parseSpecification(raw: unknown): Specification {
  if (!isObject(raw) || !isObject(raw.options) || !isObject(raw.options.filters)) throw bad('specification.options.filters is required');
  const filters = raw.options.filters;
  if (!Array.isArray(filters.dataTypes) || filters.dataTypes.length === 0 || !filters.dataTypes.every((d) => typeof d === 'string' && DATA_TYPES.has(d))) {
    throw bad('filters.dataTypes must list tableData, tableFields or tableMetadata');
  }
  const stringList = (v: unknown, name: string) => {
    if (v === undefined) return undefined;
    if (!Array.isArray(v) || !v.every((x) => typeof x === 'string')) throw bad(`${name} must be an array of strings`);
    return v as string[];
  };
  if (filters.recordChangeScope !== undefined && typeof filters.recordChangeScope !== 'string') throw bad('recordChangeScope must be a string');
  const spec: Specification = { options: { filters: { dataTypes: filters.dataTypes as string[] } } };
  if (typeof filters.recordChangeScope === 'string') spec.options.filters.recordChangeScope = filters.recordChangeScope;
  const fromSources = stringList(filters.fromSources, 'fromSources');
  if (fromSources) spec.options.filters.fromSources = fromSources;
  const watch = stringList(filters.watchDataInFieldIds, 'watchDataInFieldIds');
  if (watch) spec.options.filters.watchDataInFieldIds = watch;
  if (raw.options.includes !== undefined) {
    const inc = raw.options.includes;
    if (!isObject(inc)) throw bad('includes must be an object');
    spec.options.includes = {};
    if (inc.includeCellValuesInFieldIds !== undefined) {
      spec.options.includes.includeCellValuesInFieldIds =
        inc.includeCellValuesInFieldIds === 'all' ? 'all' : (stringList(inc.includeCellValuesInFieldIds, 'includeCellValuesInFieldIds') as string[]);
    }
    if (inc.includePreviousCellValues !== undefined) spec.options.includes.includePreviousCellValues = Boolean(inc.includePreviousCellValues);
    if (inc.includePreviousFieldDefinitions !== undefined) spec.options.includes.includePreviousFieldDefinitions = Boolean(inc.includePreviousFieldDefinitions);
  }
  return spec;
}

/**
 * Airtable's webhooks: each live webhook of a base gets one payload per write transaction that
 * matches its filters; a signed ping goes to its notification url. Expired webhooks vanish.
 */
export class WebhookStore {
  private readonly hooks = new Map<string, Webhook>();
  private readonly inflight = new Set<AbortController>();
  private closed = false;

  /** A webhook's MAC secret (test control). */
  secretOf(id: string): Buffer {
    const hook = this.hooks.get(id);
    if (!hook) throw new Error(`no webhook ${id}`);
    return hook.macSecret;
  }

  constructor(
    private readonly world: World,
    private readonly options: WebhookStoreOptions,
  ) {}

  private purge(): void {
    const now = this.world.now();
    for (const [id, hook] of this.hooks) if (hook.expirationTime <= now) this.hooks.delete(id);
  }

  private forBase(baseId: string): Webhook[] {
    this.purge();
    return [...this.hooks.values()].filter((h) => h.baseId === baseId);
  }

  private get(baseId: string, id: string): Webhook {
    this.purge();
    const hook = this.hooks.get(id);
    if (!hook || hook.baseId !== baseId) throw notFound(`Could not find webhook ${id}`);
    return hook;
  }

  hasLive(baseId: string): boolean {
    return this.forBase(baseId).length > 0;
  }

  create(baseId: string, body: unknown, tableExists: (id: string) => boolean): Record<string, unknown> {
    if (!isObject(body)) throw bad('body must be an object');
    const spec = parseSpecification(body.specification);
    const scope = spec.options.filters.recordChangeScope;
    if (scope !== undefined && !tableExists(scope)) throw bad(`recordChangeScope ${scope} is not a table of this base`);
    let notificationUrl: string | null = null;
    if (body.notificationUrl !== undefined && body.notificationUrl !== null) {
      if (typeof body.notificationUrl !== 'string' || !/^https?:\/\//.test(body.notificationUrl)) throw bad('notificationUrl must be an http(s) url');
      notificationUrl = body.notificationUrl;
    }
    if (this.forBase(baseId).length >= MAX_WEBHOOKS_PER_BASE) {
      throw unprocessable('TOO_MANY_WEBHOOKS', `A base can have at most ${MAX_WEBHOOKS_PER_BASE} webhooks`);
    }
    const macSecret = randomBytes(64);
    const hook: Webhook = {
      id: randomId('ach'),
      baseId,
      macSecret,
      notificationUrl,
      notificationsEnabled: notificationUrl !== null,
      specification: spec,
      expirationTime: this.world.now() + this.options.webhookTtlMs,
      payloads: [],
      nextCursor: 1,
      lastSuccessfulNotificationTime: null,
      lastNotificationResult: null,
      pingQueued: false,
    };
    this.hooks.set(hook.id, hook);
    return { id: hook.id, macSecretBase64: macSecret.toString('base64'), expirationTime: iso(hook.expirationTime) };
  }

  list(baseId: string): Record<string, unknown> {
    return {
      webhooks: this.forBase(baseId).map((h) => ({
        id: h.id,
        areNotificationsEnabled: h.notificationsEnabled,
        cursorForNextPayload: h.nextCursor,
        isHookEnabled: true,
        lastSuccessfulNotificationTime: h.lastSuccessfulNotificationTime,
        notificationUrl: h.notificationUrl,
        lastNotificationResult: h.lastNotificationResult,
        expirationTime: iso(h.expirationTime),
        specification: structuredClone(h.specification),
      })),
    };
  }

  remove(baseId: string, id: string): void {
    this.get(baseId, id);
    this.hooks.delete(id);
  }

  refresh(baseId: string, id: string): Record<string, unknown> {
    const hook = this.get(baseId, id);
    hook.expirationTime = this.world.now() + this.options.webhookTtlMs;
    return { expirationTime: iso(hook.expirationTime) };
  }

  enableNotifications(baseId: string, id: string, body: unknown): Record<string, unknown> {
    const hook = this.get(baseId, id);
    if (!isObject(body) || typeof body.enable !== 'boolean') throw bad('enable must be a boolean');
    hook.notificationsEnabled = body.enable;
    return {};
  }

  payloads(baseId: string, id: string, cursorParam: string | null, limitParam: string | null): Record<string, unknown> {
    const hook = this.get(baseId, id);
    this.dropOld(hook);
    const cursor = cursorParam === null ? 1 : Number(cursorParam);
    const limit = limitParam === null ? MAX_PAYLOADS_PER_PAGE : Number(limitParam);
    if (!Number.isInteger(cursor) || cursor < 1) throw bad('cursor must be a positive integer');
    if (!Number.isInteger(limit) || limit < 1 || limit > MAX_PAYLOADS_PER_PAGE) throw bad(`limit must be between 1 and ${MAX_PAYLOADS_PER_PAGE}`);
    const available = hook.payloads.filter((p) => p.cursor >= cursor);
    const page = available.slice(0, limit);
    const last = page[page.length - 1];
    const next = last ? last.cursor + 1 : Math.min(Math.max(cursor, hook.payloads[0]?.cursor ?? hook.nextCursor), hook.nextCursor);
    return { payloads: page.map((p) => structuredClone(p.payload)), cursor: next, mightHaveMore: available.length > page.length };
  }

  private dropOld(hook: Webhook): void {
    const cutoff = this.world.now() - this.options.payloadTtlMs;
    while (hook.payloads.length > 0 && (hook.payloads[0] as StoredPayload).at < cutoff) hook.payloads.shift();
  }

  /** Turns one transaction's changes into a payload for every live webhook of the base it matches. */
  deliver(set: ChangeSet): void {
    for (const hook of this.forBase(set.baseId)) {
      const payload = this.payloadFor(hook, set);
      if (!payload) continue;
      this.dropOld(hook);
      hook.payloads.push({ cursor: hook.nextCursor++, at: set.timestamp, payload });
      this.queuePing(hook);
    }
  }

  private payloadFor(hook: Webhook, set: ChangeSet): Record<string, unknown> | undefined {
    const { filters, includes = {} } = hook.specification.options;
    if (filters.fromSources && !filters.fromSources.includes(set.source.source)) return undefined;
    const types = new Set(filters.dataTypes);
    const scope = filters.recordChangeScope;
    const changedTablesById: Record<string, unknown> = {};
    for (const [tableId, changes] of set.tables) {
      if (scope !== undefined && scope !== tableId) continue;
      const out = tableChangesJson(changes, types, includes, filters.watchDataInFieldIds);
      if (Object.keys(out).length > 0) changedTablesById[tableId] = out;
    }
    const payload: Record<string, unknown> = {
      timestamp: iso(set.timestamp),
      baseTransactionNumber: set.transactionNumber,
      actionMetadata: { source: set.source.source, sourceMetadata: { user: this.userJson(set.source.userId) } },
      payloadFormat: 'v0',
    };
    let any = Object.keys(changedTablesById).length > 0;
    if (any) payload.changedTablesById = changedTablesById;
    if (types.has('tableFields') || types.has('tableMetadata')) {
      const created: Record<string, unknown> = {};
      for (const [tableId, t] of set.createdTables) {
        if (scope !== undefined && scope !== tableId) continue;
        const fieldsById: Record<string, unknown> = {};
        for (const [fieldId, shape] of t.fields) fieldsById[fieldId] = shape;
        created[tableId] = { metadata: { name: t.name, description: t.description ?? null }, fieldsById };
      }
      if (Object.keys(created).length > 0) {
        payload.createdTablesById = created;
        any = true;
      }
      const destroyed = set.destroyedTableIds.filter((id) => scope === undefined || scope === id);
      if (destroyed.length > 0) {
        payload.destroyedTableIds = destroyed;
        any = true;
      }
    }
    return any ? payload : undefined;
  }

  private userJson(userId: string): Record<string, unknown> {
    const u = this.world.users.get(userId);
    return { id: userId, email: u?.email ?? '', permissionLevel: 'create', name: u?.name ?? '' };
  }

  private queuePing(hook: Webhook): void {
    if (!hook.notificationUrl || !hook.notificationsEnabled || hook.pingQueued) return;
    hook.pingQueued = true;
    // One ping per burst of payloads, after the current write has answered.
    setImmediate(() => {
      hook.pingQueued = false;
      void this.ping(hook);
    });
  }

  private async ping(hook: Webhook): Promise<void> {
    if (this.closed || !hook.notificationUrl || !this.hooks.has(hook.id)) return;
    const body = JSON.stringify({ base: { id: hook.baseId }, webhook: { id: hook.id }, timestamp: iso(this.world.now()) });
    const mac = createHmac('sha256', hook.macSecret).update(body).digest('hex');
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), 10_000);
    this.inflight.add(controller);
    const started = Date.now();
    try {
      const res = await fetch(hook.notificationUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json; charset=utf-8', 'X-Airtable-Content-MAC': `hmac-sha256=${mac}` },
        body,
        signal: controller.signal,
      });
      await res.arrayBuffer().catch(() => undefined);
      const success = res.status >= 200 && res.status < 300;
      if (success) hook.lastSuccessfulNotificationTime = iso(Date.now());
      hook.lastNotificationResult = { success, completionTimestamp: iso(Date.now()), durationMs: Date.now() - started, retryNumber: 0 };
    } catch (e) {
      // Best effort, like Airtable's: a failed ping is recorded, never raised.
      hook.lastNotificationResult = {
        success: false,
        error: { message: e instanceof Error ? e.message : String(e) },
        completionTimestamp: iso(Date.now()),
        durationMs: Date.now() - started,
        retryNumber: 0,
      };
    } finally {
      clearTimeout(timer);
      this.inflight.delete(controller);
    }
  }

  close(): void {
    this.closed = true;
    for (const c of this.inflight) c.abort();
    this.inflight.clear();
  }
}

function tableChangesJson(
  c: TableChanges,
  types: Set<string>,
  includes: NonNullable<Specification['options']['includes']>,
  watch: string[] | undefined,
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (types.has('tableData')) {
    if (c.createdRecords.size > 0) {
      const created: Record<string, unknown> = {};
      for (const [id, r] of c.createdRecords) created[id] = { createdTime: r.createdTime, cellValuesByFieldId: r.cells };
      out.createdRecordsById = created;
    }
    const changed: Record<string, unknown> = {};
    for (const [id, r] of c.changedRecords) {
      const fieldIds = Object.keys(r.current);
      if (watch && !fieldIds.some((f) => watch.includes(f))) continue;
      const entry: Record<string, unknown> = { current: { cellValuesByFieldId: r.current } };
      if (includes.includePreviousCellValues) entry.previous = { cellValuesByFieldId: r.previous };
      const wanted = includes.includeCellValuesInFieldIds;
      if (wanted) {
        const unchanged: Record<string, unknown> = {};
        for (const [fieldId, v] of Object.entries(r.all)) {
          if (!(fieldId in r.current) && (wanted === 'all' || wanted.includes(fieldId))) unchanged[fieldId] = v;
        }
        entry.unchanged = { cellValuesByFieldId: unchanged };
      }
      changed[id] = entry;
    }
    if (Object.keys(changed).length > 0) out.changedRecordsById = changed;
    if (c.destroyedRecordIds.length > 0) out.destroyedRecordIds = [...c.destroyedRecordIds];
  }
  if (types.has('tableFields')) {
    if (c.createdFields.size > 0) out.createdFieldsById = Object.fromEntries(c.createdFields);
    if (c.changedFields.size > 0) {
      const changed: Record<string, unknown> = {};
      for (const [id, f] of c.changedFields) {
        changed[id] = includes.includePreviousFieldDefinitions ? { current: f.current, previous: f.previous } : { current: f.current };
      }
      out.changedFieldsById = changed;
    }
    if (c.destroyedFieldIds.length > 0) out.destroyedFieldIds = [...c.destroyedFieldIds];
  }
  if (types.has('tableMetadata') && c.changedMetadata) out.changedMetadata = c.changedMetadata;
  return out;
}
