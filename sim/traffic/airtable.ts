/**
 * Airtable UI traffic: several people editing one base at once through the fake's control API
 * (which acts as the base owner in the Airtable UI), while the sync follows the base.
 *
 * - typist: edits one text (sometimes number) cell of a record every 100 ms for a few seconds,
 *   like typing ("H", "He", "Hel" …), then moves to another record;
 * - bulk editor: creates and deletes records ten at a time and sets single cells of every
 *   editable type (selects, checkbox, dates, numbers, collaborators, attachments …);
 * - linker: adds and removes links, so that counts, lookups and rollups elsewhere change;
 * - schema editor: every 5–20 s (÷ schemaRate) adds, renames, retypes, re-options or deletes a
 *   field, or adds (with fields, links and records), renames or deletes a table.
 *
 * The generator works on the tables it finds (e.g. the ones `FakeBase.generate` built); it never
 * touches reserved tables, neither directly nor through links (no link cell, link field or
 * table deletion that would change a reserved table's stored cells or fields, no change to a
 * field a reserved table looks up). It keeps the base bounded: at most 8 tables, about 40 fields
 * a table, about 300 records a table. An operation the fake refuses because of the moment's
 * state (a record deleted meanwhile, a name taken) is counted `no`; anything else refused is
 * logged once per kind (with "unexpected" in the line), since it means a wrong value was sent.
 */
import type { FakeBase, FieldJson, FieldSpec, RecordJson, TableJson } from '../../fakes/airtable/index.ts';
import type { Random } from '../random.ts';
import { OpCounts, type TrafficActor } from '../types.ts';

export interface AirtableTrafficOptions {
  base: FakeBase;
  random: Random;
  log(message: string): void;
  /** table names the generator must not touch (reserved for API clients) */
  reserved?: string[];
  /** scales schema changes down/up; 1 = default */
  schemaRate?: number;
}

const MAX_TABLES = 8;
const MAX_FIELDS = 40;
const MAX_RECORDS = 300;
const MIN_RECORDS = 20;
/** How long an actor trusts its last read of a table's records. */
const RECORDS_TTL_MS = 1000;

const WORDS = [
  'Hello',
  'Atlas',
  'Birch',
  'Cobalt',
  'Delta',
  'Ember',
  'Fjord',
  'Granite',
  'Harbor',
  'Indigo',
  'Juniper',
  'Kestrel',
  'Lumen',
  'Meadow',
  'Nimbus',
  'Orchid',
  'Quartz',
  'Raven',
  'Summit',
  'Tundra',
];
const PHRASES = [
  'Hello world',
  'Call back on Monday',
  'Quarterly review',
  'Ship the new pricing page',
  'Follow up with legal',
  'Renewal due soon',
  'Needs a second look',
  'Draft ready for review',
];
const NEW_CHOICES = ['Backlog', 'Blocked', 'Review', 'Later', 'Someday', 'Archived'];
const EPOCH = Date.UTC(2023, 0, 1);
const DAY = 86_400_000;

const TYPABLE = new Set(['singleLineText', 'multilineText', 'richText']);
const TYPABLE_NUMBERS = new Set(['number', 'currency']);
/** Cell types a person edits by hand (links are the linker's). */
const EDITABLE = new Set([
  'singleLineText',
  'email',
  'url',
  'multilineText',
  'richText',
  'phoneNumber',
  'number',
  'percent',
  'currency',
  'rating',
  'duration',
  'checkbox',
  'date',
  'dateTime',
  'singleSelect',
  'multipleSelects',
  'singleCollaborator',
  'multipleCollaborators',
  'multipleAttachments',
  'barcode',
]);
const COLLABORATOR_TYPES = new Set(['singleCollaborator', 'multipleCollaborators', 'createdBy', 'lastModifiedBy']);
const NOT_PRIMARY = new Set(['multipleRecordLinks', 'multipleAttachments', 'checkbox', 'multipleCollaborators', 'multipleSelects']);

/** Conversions a person makes in the field editor, by current type. */
const RETYPES: Record<string, string[]> = {
  singleLineText: ['number', 'singleSelect', 'multilineText', 'email', 'url'],
  multilineText: ['singleLineText'],
  richText: ['singleLineText', 'multilineText'],
  email: ['singleLineText'],
  url: ['singleLineText'],
  phoneNumber: ['singleLineText'],
  number: ['singleLineText', 'currency', 'percent', 'rating'],
  currency: ['number', 'singleLineText'],
  percent: ['number', 'singleLineText'],
  duration: ['number', 'singleLineText'],
  rating: ['number'],
  singleSelect: ['singleLineText', 'multipleSelects'],
  multipleSelects: ['singleSelect', 'singleLineText'],
  checkbox: ['singleLineText', 'number'],
  date: ['dateTime', 'singleLineText'],
  dateTime: ['date', 'singleLineText'],
  singleCollaborator: ['multipleCollaborators', 'singleLineText'],
  multipleCollaborators: ['singleCollaborator'],
  barcode: ['singleLineText'],
  formula: ['singleLineText'],
};

/** Simple field types the schema editor adds, with their options. */
const NEW_FIELD_TYPES: Record<string, (r: Random) => Record<string, unknown> | undefined> = {
  singleLineText: () => undefined,
  multilineText: () => undefined,
  email: () => undefined,
  url: () => undefined,
  phoneNumber: () => undefined,
  number: (r) => ({ precision: r.int(3) }),
  currency: () => ({ precision: 2, symbol: '$' }),
  percent: (r) => ({ precision: r.int(2) }),
  rating: (r) => ({ max: r.pick([5, 10]), icon: 'star', color: 'yellowBright' }),
  duration: () => ({ durationFormat: 'h:mm' }),
  checkbox: () => ({ icon: 'check', color: 'greenBright' }),
  date: () => ({ dateFormat: { name: 'iso', format: 'YYYY-MM-DD' } }),
  dateTime: () => ({ dateFormat: { name: 'iso', format: 'YYYY-MM-DD' }, timeFormat: { name: '24hour', format: 'HH:mm' }, timeZone: 'utc' }),
  singleSelect: (r) => ({ choices: choices(r) }),
  multipleSelects: (r) => ({ choices: choices(r) }),
  singleCollaborator: () => undefined,
  multipleCollaborators: () => undefined,
  multipleAttachments: () => undefined,
  barcode: () => undefined,
};

function choices(r: Random): Array<{ name: string }> {
  const names = new Set<string>();
  const n = r.between(2, 5);
  while (names.size < n) names.add(r.pick(['Low', 'Medium', 'High', 'Open', 'Closed', 'North', 'South', 'East', 'West', 'Alpha', 'Beta']));
  return [...names].map((name) => ({ name }));
}

interface User {
  id: string;
  email: string;
  name: string;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}

/** Errors that mean "the base changed under me", which a UI user simply shrugs off. */
function isStateRefusal(e: unknown): boolean {
  const type = isObject(e) && typeof e.type === 'string' ? e.type : undefined;
  if (
    type &&
    ['ROW_DOES_NOT_EXIST', 'DUPLICATE_TABLE_NAME', 'DUPLICATE_OR_EMPTY_FIELD_NAME', 'CANNOT_DELETE_LAST_TABLE', 'CANNOT_DELETE_PRIMARY_FIELD'].includes(type)
  ) {
    return true;
  }
  return e instanceof Error && /^no (record|table|field) /.test(e.message);
}

/** What every actor shares: the base, the reserved names, and what the sim itself created. */
class Shared {
  readonly base: FakeBase;
  readonly log: (message: string) => void;
  private readonly reserved: Set<string>;
  /** Tables and fields the schema editor made (deleted first, before the generated ones). */
  readonly ownTables = new Set<string>();
  readonly ownFields = new Set<string>();
  private users: User[] | undefined;
  private readonly logged = new Set<string>();

  constructor(options: AirtableTrafficOptions) {
    this.base = options.base;
    this.log = options.log;
    this.reserved = new Set((options.reserved ?? []).map((n) => n.toLowerCase()));
  }

  isReservedName(name: string): boolean {
    return this.reserved.has(name.toLowerCase());
  }

  /** Every table now. */
  all(): TableJson[] {
    return this.base.tables();
  }

  /** The tables the generator may act on. */
  open(all = this.all()): TableJson[] {
    return all.filter((t) => !this.isReservedName(t.name));
  }

  reservedIds(all = this.all()): Set<string> {
    return new Set(all.filter((t) => this.isReservedName(t.name)).map((t) => t.id));
  }

  /** Fields of open tables a reserved table depends on: looked up, rolled up, or the other side of its links. */
  protectedFields(all = this.all()): Set<string> {
    const out = new Set<string>();
    for (const t of all) {
      if (!this.isReservedName(t.name)) continue;
      for (const f of t.fields) {
        const o = f.options ?? {};
        if (typeof o.fieldIdInLinkedTable === 'string') out.add(o.fieldIdInLinkedTable);
        if (f.type === 'multipleRecordLinks' && typeof o.inverseLinkFieldId === 'string') out.add(o.inverseLinkFieldId);
      }
    }
    return out;
  }

  /** A link field whose cells are mirrored in a reserved table. */
  linksReserved(field: FieldJson, reservedIds: Set<string>): boolean {
    return field.type === 'multipleRecordLinks' && reservedIds.has(String(field.options?.linkedTableId));
  }

  /** Collaborators cells may name: the people seen in the base's records. */
  collaborators(): User[] {
    if (this.users) return this.users;
    const found = new Map<string, User>();
    for (const t of this.all()) {
      const names = t.fields.filter((f) => COLLABORATOR_TYPES.has(f.type)).map((f) => f.name);
      if (names.length === 0) continue;
      for (const rec of this.base.records(t.id)) {
        for (const name of names) {
          const v = rec.fields[name];
          for (const u of Array.isArray(v) ? v : [v]) {
            if (isObject(u) && typeof u.id === 'string' && typeof u.email === 'string')
              found.set(u.id, { id: u.id, email: u.email, name: String(u.name ?? u.email) });
          }
        }
      }
      if (found.size >= 3) break;
    }
    this.users = [...found.values()];
    return this.users;
  }

  /** Says once per actor, kind and error type that the fake refused something the moment's state does not explain. */
  unexpected(actor: string, kind: string, e: unknown): void {
    const type = isObject(e) && typeof e.type === 'string' ? e.type : e instanceof Error ? e.name : 'error';
    const key = `${actor} ${kind} ${type}`;
    if (this.logged.has(key)) return;
    this.logged.add(key);
    this.log(`airtable traffic: ${actor}: unexpected refusal of ${kind}: ${type}: ${e instanceof Error ? e.message : String(e)}`);
  }
}

/** One person at the base: their counts, their random source, their view of records. */
abstract class Person implements TrafficActor {
  readonly counts = new OpCounts();
  private readonly cache = new Map<string, { at: number; records: RecordJson[] }>();

  constructor(
    readonly name: string,
    protected readonly shared: Shared,
    protected readonly random: Random,
  ) {}

  protected get base(): FakeBase {
    return this.shared.base;
  }

  /** One step, then how long to wait before the next. */
  protected abstract step(signal: AbortSignal): Promise<number> | number;

  async run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      let pause = 500;
      try {
        pause = await this.step(signal);
      } catch (e) {
        // A bug in the generator or a read of a table deleted meanwhile: note it, go on.
        if (!isStateRefusal(e)) this.shared.unexpected(this.name, 'step', e);
        this.counts.no('step');
      }
      await sleep(pause, signal);
    }
  }

  /** Does one operation on the base; counts it; a refusal is counted `no` and answers undefined. */
  protected attempt<T>(kind: string, tableId: string | undefined, fn: () => T): T | undefined {
    try {
      const out = fn();
      this.counts.ok(kind);
      return out;
    } catch (e) {
      this.counts.no(kind);
      if (tableId) this.cache.delete(tableId);
      if (!isStateRefusal(e)) this.shared.unexpected(this.name, kind, e);
      return undefined;
    }
  }

  /** The table's records as this person last saw them (at most a second old). */
  protected records(tableId: string): RecordJson[] {
    const now = Date.now();
    const seen = this.cache.get(tableId);
    if (seen && now - seen.at < RECORDS_TTL_MS) return seen.records;
    const records = this.base.records(tableId);
    this.cache.set(tableId, { at: now, records });
    return records;
  }

  protected forget(tableId: string): void {
    this.cache.delete(tableId);
  }

  /** The table now, or undefined when it is gone or reserved. */
  protected tableNow(tableId: string): TableJson | undefined {
    const t = this.shared.all().find((x) => x.id === tableId);
    return t && !this.shared.isReservedName(t.name) ? t : undefined;
  }

  /** A valid value a person would put in a cell of this field; null clears it. */
  protected valueFor(field: FieldJson, current?: RecordJson): unknown {
    const r = this.random;
    const o = field.options ?? {};
    if (field.type !== 'checkbox' && r.chance(0.08)) return null;
    const word = () => r.pick(WORDS);
    switch (field.type) {
      case 'singleLineText':
        return `${word()} ${r.int(1000)}`;
      case 'email':
        return `${word().toLowerCase()}${r.int(100)}@example.com`;
      case 'url':
        return `https://example.com/${word().toLowerCase()}/${r.int(1000)}`;
      case 'multilineText':
        return `${r.pick(PHRASES)}\n${r.pick(PHRASES)}`;
      case 'richText':
        return `**${word()}** and _${word().toLowerCase()}_\n`;
      case 'phoneNumber':
        return `(555) ${r.between(100, 999)}-${r.between(1000, 9999)}`;
      case 'number': {
        const precision = typeof o.precision === 'number' ? o.precision : 0;
        return Math.round(r.next() * 10_000 * 10 ** precision) / 10 ** precision;
      }
      case 'percent':
        return r.int(101) / 100;
      case 'currency':
        return r.int(1_000_000) / 100;
      case 'rating':
        return r.between(1, typeof o.max === 'number' ? o.max : 5);
      case 'duration':
        return r.int(600) * 60;
      case 'checkbox':
        return r.chance(0.5);
      case 'date':
        return new Date(EPOCH + r.int(730) * DAY).toISOString().slice(0, 10);
      case 'dateTime':
        return new Date(EPOCH + r.int(730 * 24 * 60) * 60_000).toISOString();
      case 'singleSelect': {
        const names = choiceNames(field);
        return names.length === 0 || (r.chance(0.1) && names.length < 12) ? r.pick(NEW_CHOICES) : r.pick(names);
      }
      case 'multipleSelects': {
        const names = choiceNames(field);
        if (names.length === 0) return [r.pick(NEW_CHOICES)];
        return [...new Set(Array.from({ length: r.between(1, Math.min(3, names.length)) }, () => r.pick(names)))];
      }
      case 'singleCollaborator': {
        const users = this.shared.collaborators();
        return users.length === 0 ? null : { id: r.pick(users).id };
      }
      case 'multipleCollaborators': {
        const users = this.shared.collaborators();
        if (users.length === 0) return null;
        return [...new Set(Array.from({ length: r.between(1, Math.min(3, users.length)) }, () => r.pick(users).id))].map((id) => ({ id }));
      }
      case 'multipleAttachments': {
        const kept = (Array.isArray(current?.fields[field.name]) ? (current!.fields[field.name] as Array<{ id: string }>) : [])
          .filter(() => r.chance(0.7))
          .slice(0, 3)
          .map((a) => ({ id: a.id }));
        const image = r.chance(0.5);
        return [...kept, { url: `https://example.com/files/${word().toLowerCase()}-${r.int(10_000)}.${image ? 'png' : 'pdf'}` }];
      }
      case 'barcode':
        return { text: String(r.between(100_000_000, 999_999_999)) };
      default:
        return null;
    }
  }
}

function choiceNames(field: FieldJson): string[] {
  const list = field.options?.choices;
  return Array.isArray(list) ? list.filter(isObject).map((c) => String(c.name)) : [];
}

/** The keystrokes of typing `text`: each prefix, with the odd typo typed and taken back. */
function keystrokes(text: string, r: Random): string[] {
  const out: string[] = [];
  for (let i = 1; i <= text.length; i++) {
    if (r.chance(0.06) && i > 1) {
      out.push(text.slice(0, i - 1) + r.pick(['x', 'q', 'j', '0']));
      out.push(text.slice(0, i - 1));
    }
    out.push(text.slice(0, i));
  }
  return out;
}

class Typist extends Person {
  private session: { tableId: string; fieldId: string; recordId: string; keys: unknown[]; until: number } | undefined;

  protected step(): number {
    if (!this.session) {
      this.session = this.pickSession();
      if (!this.session) return 1000;
    }
    const s = this.session;
    const key = s.keys.shift();
    const table = this.tableNow(s.tableId);
    const field = table?.fields.find((f) => f.id === s.fieldId);
    const typing = field && (TYPABLE.has(field.type) || TYPABLE_NUMBERS.has(field.type));
    if (key === undefined || !table || !typing || Date.now() > s.until) {
      // Done with this cell (or it changed type, or its table went): on to another record.
      this.session = undefined;
      return this.random.between(300, 1500);
    }
    const done = this.attempt('record.update', s.tableId, () => this.base.updateRecord(s.tableId, s.recordId, { [s.fieldId]: key }));
    if (!done) this.session = undefined;
    return 100;
  }

  private pickSession(): Typist['session'] {
    const r = this.random;
    const tables = this.shared.open().filter((t) => t.fields.some((f) => TYPABLE.has(f.type)));
    if (tables.length === 0) return undefined;
    const table = r.pick(tables);
    const records = this.records(table.id);
    if (records.length === 0) return undefined;
    const numbers = table.fields.filter((f) => TYPABLE_NUMBERS.has(f.type));
    const numeric = numbers.length > 0 && r.chance(0.2);
    const field = numeric ? r.pick(numbers) : r.pick(table.fields.filter((f) => TYPABLE.has(f.type)));
    const record = r.pick(records);
    let keys: unknown[];
    if (numeric) {
      const digits = String(r.between(1, 99_999));
      keys = digits.split('').map((_, i) => Number(digits.slice(0, i + 1)));
    } else {
      const existing = record.fields[field.name];
      // Sometimes carries on after the text already there; mostly types afresh.
      const start = typeof existing === 'string' && existing.length < 60 && r.chance(0.3) ? `${existing} ` : '';
      keys = keystrokes(r.pick(PHRASES), r).map((k) => start + k);
    }
    const until = Date.now() + r.between(2000, 5000);
    return { tableId: table.id, fieldId: field.id, recordId: record.id, keys, until };
  }
}

class BulkEditor extends Person {
  protected step(): number {
    const r = this.random;
    const all = this.shared.all();
    const reservedIds = this.shared.reservedIds(all);
    const tables = this.shared.open(all);
    if (tables.length === 0) return 1000;
    const full = tables.filter((t) => this.base.recordCount(t.id) > MAX_RECORDS);
    const sparse = tables.filter((t) => this.base.recordCount(t.id) < MIN_RECORDS);
    let op = r.weighted({ update: 6, create: 1, delete: 1 });
    let table = r.pick(tables);
    if (full.length > 0 && r.chance(0.5)) [op, table] = ['delete', r.pick(full)];
    else if (sparse.length > 0 && r.chance(0.3)) [op, table] = ['create', r.pick(sparse)];
    const editable = table.fields.filter((f) => EDITABLE.has(f.type));
    switch (op) {
      case 'create': {
        const primary = table.fields.find((f) => f.id === table.primaryFieldId);
        const rows = Array.from({ length: 10 }, () => {
          const row: Record<string, unknown> = {};
          if (primary && EDITABLE.has(primary.type)) row[primary.id] = this.valueFor(primary) ?? `${r.pick(WORDS)} ${r.int(1000)}`;
          for (let k = r.between(1, 4); k > 0 && editable.length > 0; k--) {
            const f = r.pick(editable);
            if (f.type !== 'multipleAttachments') row[f.id] = this.valueFor(f);
          }
          return row;
        });
        this.attempt('records.create', table.id, () => this.base.createRecords(table.id, rows));
        this.forget(table.id);
        break;
      }
      case 'delete': {
        // Never one whose links a reserved table mirrors (read afresh: API clients may just have linked it).
        const linkNames = table.fields.filter((f) => this.shared.linksReserved(f, reservedIds)).map((f) => f.name);
        if (linkNames.length > 0) this.forget(table.id);
        const records = this.records(table.id).filter((rec) =>
          linkNames.every((n) => !Array.isArray(rec.fields[n]) || (rec.fields[n] as unknown[]).length === 0),
        );
        if (records.length < 15) return 200;
        const ids = new Set<string>();
        while (ids.size < 10) ids.add(r.pick(records).id);
        this.attempt('records.delete', table.id, () => this.base.deleteRecords(table.id, [...ids]));
        this.forget(table.id);
        break;
      }
      default: {
        const records = this.records(table.id);
        if (records.length === 0 || editable.length === 0) return 200;
        const record = r.pick(records);
        const fields: Record<string, unknown> = {};
        for (let k = r.chance(0.2) ? r.between(2, 3) : 1; k > 0; k--) {
          const f = r.pick(editable);
          fields[f.id] = this.valueFor(f, record);
        }
        const after = this.attempt('record.update', table.id, () => this.base.updateRecord(table.id, record.id, fields));
        // What this person now sees (attachments kept by id must be the ones in the cell now).
        if (after) record.fields = after.fields;
      }
    }
    return r.between(250, 700);
  }
}

class Linker extends Person {
  protected step(): number {
    const r = this.random;
    const all = this.shared.all();
    const reservedIds = this.shared.reservedIds(all);
    const ids = new Set(all.map((t) => t.id));
    const links: Array<{ table: TableJson; field: FieldJson }> = [];
    for (const table of this.shared.open(all)) {
      for (const field of table.fields) {
        if (field.type === 'multipleRecordLinks' && ids.has(String(field.options?.linkedTableId)) && !this.shared.linksReserved(field, reservedIds))
          links.push({ table, field });
      }
    }
    if (links.length === 0) return 1000;
    const { table, field } = r.pick(links);
    const linkedId = String(field.options?.linkedTableId);
    const records = this.records(table.id);
    const targets = this.records(linkedId);
    if (records.length === 0 || targets.length === 0) return 300;
    const record = r.pick(records);
    const current = Array.isArray(record.fields[field.name]) ? (record.fields[field.name] as string[]) : [];
    let next: string[];
    let kind: string;
    if (current.length > 0 && (current.length >= 4 || r.chance(0.45))) {
      const drop = r.pick(current);
      next = current.filter((id) => id !== drop);
      kind = 'link.remove';
    } else if (current.length > 0 && r.chance(0.15)) {
      next = [r.pick(targets).id];
      kind = 'link.replace';
    } else {
      const add = r.pick(targets).id;
      next = current.includes(add) ? current : [...current, add];
      kind = 'link.add';
    }
    const after = this.attempt(kind, table.id, () => this.base.updateRecord(table.id, record.id, { [field.id]: next }));
    if (after) {
      // What this person now sees in that cell (the next look at the table may come from the cache).
      record.fields[field.name] = after.fields[field.name];
    } else {
      this.forget(linkedId);
    }
    return r.between(300, 900);
  }
}

type SchemaCard = 'field.add' | 'field.rename' | 'field.retype' | 'field.options' | 'field.delete' | 'table.create' | 'table.rename' | 'table.delete';
const DECK: SchemaCard[] = [
  'field.add',
  'field.add',
  'field.rename',
  'field.retype',
  'field.retype',
  'field.options',
  'field.delete',
  'table.create',
  'table.rename',
  'table.delete',
];

class SchemaEditor extends Person {
  private deck: SchemaCard[] = [];
  private serial = 0;
  private first = true;

  constructor(
    name: string,
    shared: Shared,
    random: Random,
    private readonly rate: number,
  ) {
    super(name, shared, random);
  }

  private pause(): number {
    return this.random.between(5000, 20_000) / this.rate;
  }

  protected step(): number {
    // A person opens the field editor a while after starting.
    if (this.first) {
      this.first = false;
      return this.pause();
    }
    if (this.deck.length === 0) {
      // Every kind of change once a round, in a random order, so that a short run sees each.
      this.deck = [...DECK];
      for (let i = this.deck.length - 1; i > 0; i--) {
        const j = this.random.int(i + 1);
        [this.deck[i], this.deck[j]] = [this.deck[j] as SchemaCard, this.deck[i] as SchemaCard];
      }
    }
    this.play(this.deck.shift() as SchemaCard);
    return this.pause();
  }

  private play(card: SchemaCard): void {
    const all = this.shared.all();
    const open = this.shared.open(all);
    if (open.length === 0) return;
    switch (card) {
      case 'field.add':
        return this.addField(all, open);
      case 'field.rename':
        return this.renameField(all, open);
      case 'field.retype':
        return this.retypeField(all, open);
      case 'field.options':
        return this.changeOptions(all, open);
      case 'field.delete':
        return this.deleteField(all, open);
      case 'table.create':
        return all.length >= MAX_TABLES ? this.deleteTable(all, open) : this.createTable(all, open);
      case 'table.rename':
        return this.renameTable(all, open);
      case 'table.delete':
        return this.deleteTable(all, open);
    }
  }

  private newName(taken: string[], stem: string): string {
    const lower = new Set(taken.map((n) => n.toLowerCase()));
    let name: string;
    do name = `${stem} ${++this.serial}`;
    while (lower.has(name.toLowerCase()) || this.shared.isReservedName(name));
    return name;
  }

  /** A new field's spec for `table`: a simple type mostly, sometimes a link, a lookup, a rollup, a count or a formula. */
  private fieldSpec(all: TableJson[], table: TableJson): FieldSpec | undefined {
    const r = this.random;
    const reservedIds = this.shared.reservedIds(all);
    const name = this.newName(
      table.fields.map((f) => f.name),
      r.pick(WORDS),
    );
    const links = table.fields.filter(
      (f) => f.type === 'multipleRecordLinks' && !this.shared.linksReserved(f, reservedIds) && all.some((t) => t.id === f.options?.linkedTableId),
    );
    const kind = r.weighted({
      simple: 10,
      link: 2,
      lookup: links.length > 0 ? 2 : 0,
      rollup: links.length > 0 ? 1 : 0,
      count: links.length > 0 ? 1 : 0,
      formula: 1,
    });
    switch (kind) {
      case 'link': {
        const targets = this.shared.open(all).filter((t) => t.id === table.id || t.fields.length < MAX_FIELDS - 1);
        if (targets.length === 0) return undefined;
        return { name, type: 'multipleRecordLinks', options: { linkedTableId: r.pick(targets).id } };
      }
      case 'lookup':
      case 'rollup':
      case 'count': {
        const link = r.pick(links);
        const linked = all.find((t) => t.id === link.options?.linkedTableId) as TableJson;
        if (kind === 'count') return { name, type: 'count', options: { recordLinkFieldId: link.id } };
        if (kind === 'lookup')
          return { name, type: 'multipleLookupValues', options: { recordLinkFieldId: link.id, fieldIdInLinkedTable: r.pick(linked.fields).id } };
        const numeric = linked.fields.filter((f) => ['number', 'currency', 'percent', 'rating', 'duration', 'count'].includes(f.type));
        if (numeric.length === 0) return { name, type: 'count', options: { recordLinkFieldId: link.id } };
        return {
          name,
          type: 'rollup',
          options: { recordLinkFieldId: link.id, fieldIdInLinkedTable: r.pick(numeric).id, formula: r.pick(['SUM(values)', 'MAX(values)', 'AVERAGE(values)']) },
        };
      }
      case 'formula': {
        const numbers = table.fields.filter((f) => ['number', 'currency', 'percent', 'rating'].includes(f.type) && !/[{}]/.test(f.name));
        const texts = table.fields.filter((f) => TYPABLE.has(f.type) && !/[{}]/.test(f.name));
        if (numbers.length > 0 && r.chance(0.6)) return { name, type: 'formula', options: { formula: `{${r.pick(numbers).name}} * ${r.between(2, 10)}` } };
        if (texts.length > 0) return { name, type: 'formula', options: { formula: `UPPER({${r.pick(texts).name}}) & "!"` } };
        return { name, type: 'formula', options: { formula: 'RECORD_ID()' } };
      }
      default: {
        const type = r.pick(Object.keys(NEW_FIELD_TYPES));
        const options = (NEW_FIELD_TYPES[type] as (r: Random) => Record<string, unknown> | undefined)(r);
        return options ? { name, type, options } : { name, type };
      }
    }
  }

  private addField(all: TableJson[], open: TableJson[]): void {
    const roomy = open.filter((t) => t.fields.length < MAX_FIELDS);
    if (roomy.length === 0) return this.deleteField(all, open);
    const table = this.random.pick(roomy);
    const spec = this.fieldSpec(all, table);
    if (!spec) return;
    const field = this.attempt('field.add', table.id, () => this.base.addField(table.id, spec));
    if (!field) return;
    this.shared.ownFields.add(field.id);
    this.shared.log(`airtable traffic: field ${field.name} (${field.type}) added to ${table.name}`);
  }

  /** Fields of open tables that schema changes may act on (none a reserved table depends on). */
  private fields(all: TableJson[], open: TableJson[]): Array<{ table: TableJson; field: FieldJson }> {
    const guarded = this.shared.protectedFields(all);
    const reservedIds = this.shared.reservedIds(all);
    return open.flatMap((table) =>
      table.fields.filter((f) => !guarded.has(f.id) && !this.shared.linksReserved(f, reservedIds)).map((field) => ({ table, field })),
    );
  }

  private renameField(all: TableJson[], open: TableJson[]): void {
    const candidates = this.fields(all, open);
    if (candidates.length === 0) return;
    const { table, field } = this.random.pick(candidates);
    const stem = field.name.replace(/ \d+$/, '') || 'Field';
    const name = this.newName(
      table.fields.map((f) => f.name),
      stem,
    );
    const done = this.attempt('field.rename', table.id, () => {
      this.base.renameField(table.id, field.id, name);
      return true;
    });
    if (done) this.shared.log(`airtable traffic: field ${field.name} of ${table.name} renamed to ${name}`);
  }

  private retypeField(all: TableJson[], open: TableJson[]): void {
    const r = this.random;
    const candidates = this.fields(all, open).filter(({ table, field }) =>
      (RETYPES[field.type] ?? []).some((to) => field.id !== table.primaryFieldId || !NOT_PRIMARY.has(to)),
    );
    if (candidates.length === 0) return;
    // The primary field changes type now and then, other fields more often.
    const nonPrimary = candidates.filter(({ table, field }) => field.id !== table.primaryFieldId);
    const { table, field } = nonPrimary.length > 0 && r.chance(0.9) ? r.pick(nonPrimary) : r.pick(candidates);
    const targets = (RETYPES[field.type] as string[]).filter((to) => field.id !== table.primaryFieldId || !NOT_PRIMARY.has(to));
    const type = r.pick(targets);
    const options = type === 'singleSelect' || type === 'multipleSelects' ? undefined : NEW_FIELD_TYPES[type]?.(r);
    const after = this.attempt('field.retype', table.id, () => this.base.retypeField(table.id, field.id, type, options));
    if (after) this.shared.log(`airtable traffic: field ${field.name} of ${table.name} retyped ${field.type} → ${type}`);
  }

  private changeOptions(all: TableJson[], open: TableJson[]): void {
    const r = this.random;
    const candidates = this.fields(all, open).filter(({ field }) => ['singleSelect', 'multipleSelects', 'number', 'currency', 'percent'].includes(field.type));
    if (candidates.length === 0) return;
    const { table, field } = r.pick(candidates);
    let options: Record<string, unknown>;
    if (field.type === 'singleSelect' || field.type === 'multipleSelects') {
      const existing = (field.options?.choices as Array<Record<string, unknown>> | undefined) ?? [];
      if (existing.length >= 12 || (existing.length > 1 && r.chance(0.3))) {
        // Renames a choice: every cell showing it changes.
        const at = r.int(existing.length);
        const renamed = existing.map((c, i) => (i === at ? { ...c, name: `${String(c.name).replace(/ \d+$/, '')} ${++this.serial}` } : c));
        options = { choices: renamed };
      } else {
        const names = new Set(existing.map((c) => String(c.name)));
        const name = [...NEW_CHOICES, ...WORDS].find((n) => !names.has(n)) ?? `Choice ${++this.serial}`;
        options = { choices: [...existing, { name }] };
      }
    } else {
      const precision = typeof field.options?.precision === 'number' ? field.options.precision : 0;
      options = { precision: (precision + 1 + r.int(2)) % 3 };
    }
    const after = this.attempt('field.options', table.id, () => this.base.updateFieldOptions(table.id, field.id, options));
    if (after) this.shared.log(`airtable traffic: options of field ${field.name} of ${table.name} changed`);
  }

  private deleteField(all: TableJson[], open: TableJson[]): void {
    const r = this.random;
    const candidates = this.fields(all, open).filter(({ table, field }) => field.id !== table.primaryFieldId);
    if (candidates.length === 0) return;
    const own = candidates.filter(({ field }) => this.shared.ownFields.has(field.id));
    const crowded = candidates.filter(({ table }) => table.fields.length >= MAX_FIELDS);
    const { table, field } = crowded.length > 0 ? r.pick(crowded) : own.length > 0 && r.chance(0.6) ? r.pick(own) : r.pick(candidates);
    const done = this.attempt('field.delete', table.id, () => {
      this.base.deleteField(table.id, field.id);
      return true;
    });
    if (!done) return;
    this.shared.ownFields.delete(field.id);
    this.shared.log(`airtable traffic: field ${field.name} (${field.type}) deleted from ${table.name}`);
  }

  private createTable(all: TableJson[], open: TableJson[]): void {
    const r = this.random;
    const name = this.newName(
      all.map((t) => t.name),
      `Sim ${r.pick(WORDS)}`,
    );
    const fields: FieldSpec[] = [{ name: 'Name', type: 'singleLineText' }];
    const types = Object.keys(NEW_FIELD_TYPES).filter((t) => t !== 'singleLineText');
    for (let k = r.between(2, 4); k > 0; k--) {
      const type = r.pick(types);
      const options = NEW_FIELD_TYPES[type]?.(r);
      // The words may repeat; the suffix keeps the names apart.
      const field = `${r.pick(WORDS)} ${k}`;
      fields.push(options ? { name: field, type, options } : { name: field, type });
    }
    const table = this.attempt('table.create', undefined, () => this.base.createTable(name, fields));
    if (!table) return;
    this.shared.ownTables.add(table.id);
    // Linked to another table, with a count and a lookup over the link, and a few records.
    const others = open.filter((t) => t.fields.length < MAX_FIELDS - 1);
    let linkId: string | undefined;
    if (others.length > 0) {
      const other = r.pick(others);
      const link = this.attempt('field.add', table.id, () =>
        this.base.addField(table.id, { name: `Link to ${other.name}`, type: 'multipleRecordLinks', options: { linkedTableId: other.id } }),
      );
      if (link) {
        linkId = link.id;
        this.attempt('field.add', table.id, () =>
          this.base.addField(table.id, { name: 'Linked count', type: 'count', options: { recordLinkFieldId: link.id } }),
        );
        this.attempt('field.add', table.id, () =>
          this.base.addField(table.id, {
            name: 'Linked names',
            type: 'multipleLookupValues',
            options: { recordLinkFieldId: link.id, fieldIdInLinkedTable: other.primaryFieldId },
          }),
        );
      }
    }
    const now = this.base.table(table.id);
    const targets = linkId ? this.records(String(now.fields.find((f) => f.id === linkId)?.options?.linkedTableId)) : [];
    const editable = now.fields.filter((f) => EDITABLE.has(f.type) && f.type !== 'multipleAttachments');
    const rows = Array.from({ length: r.between(3, 10) }, () => {
      const row: Record<string, unknown> = { Name: `${r.pick(WORDS)} ${r.int(1000)}` };
      for (const f of editable) if (f.name !== 'Name' && r.chance(0.6)) row[f.id] = this.valueFor(f);
      if (linkId && targets.length > 0 && r.chance(0.7)) row[linkId] = [...new Set([r.pick(targets).id, r.pick(targets).id])];
      return row;
    });
    this.attempt('records.create', table.id, () => this.base.createRecords(table.id, rows));
    this.shared.log(`airtable traffic: table ${name} created (${now.fields.length} fields, ${rows.length} records)`);
  }

  private renameTable(all: TableJson[], open: TableJson[]): void {
    const table = this.random.pick(open);
    const stem = table.name.replace(/ \d+$/, '');
    const name = this.newName(
      all.map((t) => t.name),
      stem,
    );
    const done = this.attempt('table.rename', undefined, () => {
      this.base.renameTable(table.id, name);
      return true;
    });
    if (done) this.shared.log(`airtable traffic: table ${table.name} renamed to ${name}`);
  }

  private deleteTable(all: TableJson[], open: TableJson[]): void {
    const reservedIds = this.shared.reservedIds(all);
    // Not one whose links a reserved table mirrors (deleting it would delete their other side).
    const deletable = open.filter((t) => !t.fields.some((f) => this.shared.linksReserved(f, reservedIds)));
    const own = deletable.filter((t) => this.shared.ownTables.has(t.id));
    // The generated tables stay while few tables are left; the sim's own go first.
    const candidates = own.length > 0 ? own : open.length > 3 ? deletable : [];
    if (candidates.length === 0 || all.length <= 1) {
      if (all.length < MAX_TABLES) this.createTable(all, open);
      return;
    }
    const table = this.random.pick(candidates);
    const done = this.attempt('table.delete', undefined, () => {
      this.base.deleteTable(table.id);
      return true;
    });
    if (!done) return;
    this.shared.ownTables.delete(table.id);
    this.forget(table.id);
    this.shared.log(`airtable traffic: table ${table.name} deleted`);
  }
}

/**
 * Several people editing one base at once, each with its own random source (`random.fork(i)`).
 * The base must exist with its tables already (e.g. from `FakeBase.generate`).
 */
export function airtableUsers(options: AirtableTrafficOptions): TrafficActor[] {
  const shared = new Shared(options);
  const rate = options.schemaRate && options.schemaRate > 0 ? options.schemaRate : 1;
  return [
    new Typist('airtable.typist', shared, options.random.fork(0)),
    new BulkEditor('airtable.bulk-editor', shared, options.random.fork(1)),
    new Linker('airtable.linker', shared, options.random.fork(2)),
    new SchemaEditor('airtable.schema-editor', shared, options.random.fork(3), rate),
  ];
}
