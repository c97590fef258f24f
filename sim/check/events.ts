import type { Violation } from '../types.ts';
import { type Canonical, canonical, same, type TableRows } from './canonical.ts';

/** An event as a consumer gets it: its idempotency key and the event JSON. */
export interface DeliveredEvent {
  key: string;
  value: string;
  /** Where it came from, for the violation's text (e.g. `rest svc.x.customer/0@12`). */
  where: string;
}

interface EventJson {
  collection: string;
  created_at: string;
  data: Record<string, unknown>;
  event: 'inserted' | 'updated' | 'deleted' | 'read' | 'gap';
  id: string;
  table_db_name: string;
  changes?: Record<string, unknown>;
}

/** Folding one path's events: record → its row as the events tell it. */
export interface Fold {
  /** table → record id → column → value (raw JSON values; canonical once types are known). */
  rows: Map<string, Map<string, Record<string, unknown>>>;
  violations: Violation[];
  events: number;
  /** Deliveries of a key seen before (at-least-once): skipped, checked to be identical. */
  duplicates: number;
}

const MAX_PER_KIND = 20;

/** One value in two events: the decoder writes each value one way, so equal means equal JSON. */
const sameValue = (a: unknown, b: unknown) => JSON.stringify(a ?? null) === JSON.stringify(b ?? null);

/** A column of a row as the events tell it: one its events never named is null. */
const cell = (row: Record<string, unknown>, column: string) => (Object.hasOwn(row, column) ? row[column] : null);

/**
 * Folds the events of one delivery path (REST from offset 0, Kafka, webhooks), in the order
 * the path delivers them per record, and checks each against what the fold held before it:
 * an insert of a record that exists, an update or delete of one that does not, an update
 * whose `changes` is empty, names a column that did not change, misses one that did, or
 * holds a value other than the prior one. Types are not known here, so values are compared
 * as JSON; the comparison with the database (compareFold) normalises them. Events can be
 * added as they come (during the traffic) and the fold compared at the end.
 */
export class EventFold implements Fold {
  readonly rows = new Map<string, Map<string, Record<string, unknown>>>();
  events = 0;
  duplicates = 0;
  private readonly found: Violation[] = [];
  private readonly seen = new Map<string, string>();
  private readonly counts = new Map<string, number>();
  /** table → record id → commit LSN of the record's latest event, for a gap marker's rule. */
  private readonly lsns = new Map<string, Map<string, bigint>>();
  /** Tables past a gap marker: their records start again, as after a backfill's first read. */
  private readonly restarted = new Set<string>();
  /**
   * What an event committed after a gap's start would be a violation for, held until the
   * gap's marker comes (docs/events.md#gaps-a-lost-replication-slot): a path that keeps order
   * per record only (webhooks) can deliver a re-read or a later change before it. The marker
   * excuses those of its table from its `resumed_lsn` on; the rest count at the end.
   */
  private pending: Array<{ table: string; commit: bigint; kind: string; detail: string }> = [];
  /** The event being applied: its table and commit LSN (see pending). */
  private applying: { table: string; commit: bigint } | undefined;

  /**
   * `midStream`: the events start somewhere after the record's first (a backfill's first
   * read, a destination made later): a record may first appear in an update or a delete.
   */
  constructor(
    private readonly path: string,
    private readonly options: { midStream?: boolean } = {},
  ) {}

  /** What failed, with what is still held for a marker (read again later, a marker may excuse more). */
  get violations(): Violation[] {
    const counts = new Map(this.counts);
    const found = [...this.found];
    const note = (kind: string, detail: string) => {
      const n = (counts.get(kind) ?? 0) + 1;
      counts.set(kind, n);
      if (n <= MAX_PER_KIND) found.push({ check: `events-fold (${this.path})`, detail });
    };
    for (const held of this.pending) note(held.kind, held.detail);
    const more = [...counts].filter(([, n]) => n > MAX_PER_KIND);
    return [...found, ...more.map(([kind, n]) => ({ check: `events-fold (${this.path})`, detail: `… and ${n - MAX_PER_KIND} more of kind ${kind}` }))];
  }

  private fail(kind: string, detail: string): void {
    if (this.applying && this.applying.commit > 0n) this.pending.push({ ...this.applying, kind, detail });
    else this.count(kind, detail);
  }

  private count(kind: string, detail: string): void {
    const n = (this.counts.get(kind) ?? 0) + 1;
    this.counts.set(kind, n);
    if (n <= MAX_PER_KIND) this.found.push({ check: `events-fold (${this.path})`, detail });
  }

  add(deliveries: Iterable<DeliveredEvent>): this {
    for (const delivery of deliveries) {
      const earlier = this.seen.get(delivery.key);
      if (earlier !== undefined) {
        this.duplicates++;
        if (earlier !== delivery.value) this.fail('key', `${delivery.where}: key ${delivery.key} was delivered before with another event`);
        continue;
      }
      this.seen.set(delivery.key, delivery.value);
      this.events++;
      this.apply(JSON.parse(delivery.value) as EventJson, delivery.where, commitOf(delivery.key));
    }
    return this;
  }

  private apply(event: EventJson, where: string, commit: bigint): void {
    const table = this.rows.get(event.table_db_name) ?? new Map<string, Record<string, unknown>>();
    this.rows.set(event.table_db_name, table);
    const lsns = this.lsns.get(event.table_db_name) ?? new Map<string, bigint>();
    this.lsns.set(event.table_db_name, lsns);
    if (event.event === 'gap') {
      // docs/events.md#gaps-a-lost-replication-slot: every record whose latest event came
      // before the new slot's start is dropped; the re-read and the changes after it bring
      // back what the table holds. What those changes seemed to violate before it came is excused.
      const resumed = lsnValue(String(event.data.resumed_lsn ?? event.data.commit_lsn));
      for (const id of [...table.keys()]) if ((lsns.get(id) ?? 0n) < resumed) table.delete(id);
      this.restarted.add(event.table_db_name);
      this.pending = this.pending.filter((held) => held.table !== event.table_db_name || held.commit < resumed);
      return;
    }
    lsns.set(event.id, commit);
    this.applying = { table: event.table_db_name, commit };
    try {
      this.applyChange(event, where, table, this.options.midStream || this.restarted.has(event.table_db_name));
    } finally {
      this.applying = undefined;
    }
  }

  private applyChange(event: EventJson, where: string, table: Map<string, Record<string, unknown>>, midStream: boolean | undefined): void {
    const before = table.get(event.id);
    const at = `${where} ${event.event} ${event.table_db_name}/${event.id}`;
    if (event.event === 'inserted') {
      if (before) this.fail('insert', `${at}: inserted, but the events already had this record`);
      table.set(event.id, event.data);
      return;
    }
    if (event.event === 'deleted') {
      if (!before && !midStream) this.fail('delete', `${at}: deleted, but the events never had this record`);
      table.delete(event.id);
      return;
    }
    if (event.event === 'read') {
      // A read is the row as it was at its place in commit order: the record as the events
      // before it left it, exactly. A read that overtook a newer change of its record, or
      // lagged behind an older one, differs here.
      if (!before && !midStream) this.fail('read', `${at}: a read, but the events never had this record`);
      if (before) {
        for (const column of new Set([...Object.keys(before), ...Object.keys(event.data)])) {
          if (!sameValue(cell(before, column), cell(event.data, column))) {
            this.fail(
              'read',
              `${at}: the read has ${column} = ${JSON.stringify(cell(event.data, column))}, but the events before it left ${JSON.stringify(cell(before, column))}`,
            );
          }
        }
      }
      table.set(event.id, event.data);
      return;
    }
    if (!before && midStream) {
      table.set(event.id, event.data);
      return;
    }
    if (!before) this.fail('update', `${at}: updated, but the events never had this record`);
    const changes = event.changes ?? {};
    if (Object.keys(changes).length === 0) this.fail('empty', `${at}: an update with no changed column`);
    if (before) {
      // Every column either side names: one a record's events never named counts as null, so
      // a column added, removed or renamed is checked like any other (docs/events.md).
      for (const [column, prior] of Object.entries(changes)) {
        if (!sameValue(cell(before, column), prior)) {
          this.fail('prior', `${at}: changes.${column} is ${JSON.stringify(prior)}, but the record held ${JSON.stringify(cell(before, column))}`);
        }
        if (sameValue(cell(event.data, column), prior)) this.fail('unchanged', `${at}: changes names ${column}, which did not change`);
      }
      for (const column of new Set([...Object.keys(before), ...Object.keys(event.data)])) {
        if (Object.hasOwn(changes, column)) continue;
        if (!sameValue(cell(before, column), cell(event.data, column))) {
          this.fail(
            'missed',
            `${at}: ${column} went from ${JSON.stringify(cell(before, column))} to ${JSON.stringify(cell(event.data, column))} but is not in changes`,
          );
        }
      }
    }
    table.set(event.id, event.data);
  }
}

/** An LSN's text (`16/B374D848`) as a number. */
const lsnValue = (lsn: string) => {
  const [high, low] = lsn.split('/');
  return (BigInt(`0x${high}`) << 32n) + BigInt(`0x${low}`);
};

/** The commit LSN in an event's key (`<sync>.<commit LSN>.<position>`, a marker's with `.<partition>` after). */
const commitOf = (key: string) => {
  const lsn = key.split('.')[1];
  return lsn?.includes('/') ? lsnValue(lsn) : 0n;
};

export function foldEvents(path: string, deliveries: Iterable<DeliveredEvent>, options: { midStream?: boolean } = {}): Fold {
  return new EventFold(path, options).add(deliveries);
}

/**
 * The folded rows against the database's: the same records in every table, and every column
 * of each the same value (canonical by the column's type), over the columns of both: a column
 * the record's events never named counts as null, and so does one the table no longer has.
 * A table with no events and no rows is equal. `tables`, when given, limits the comparison
 * (a webhook destination subscribed to some topics).
 */
export function compareFold(path: string, fold: Fold, database: Map<string, TableRows>, tables?: Set<string>): Violation[] {
  const violations: Violation[] = [];
  const byColumn = new Map<string, { n: number; example: string }>();
  const note = (what: string, example: string) => {
    const entry = byColumn.get(what);
    if (entry) entry.n++;
    else byColumn.set(what, { n: 1, example });
  };
  const compared = new Set([...database.keys(), ...fold.rows.keys()].filter((t) => !tables || tables.has(t)));
  for (const table of compared) {
    const db = database.get(table);
    const folded = fold.rows.get(table) ?? new Map<string, Record<string, unknown>>();
    const dbRows = db?.rows ?? new Map<string, Map<string, Canonical>>();
    for (const [id] of dbRows) if (!folded.has(id)) note(`${table}: in the database, not in the events`, id);
    for (const [id, data] of folded) {
      const row = dbRows.get(id);
      if (!row) {
        note(`${table}: in the events, not in the database`, id);
        continue;
      }
      for (const [column, oid] of db!.columns) {
        const fromEvents = canonical(oid, cell(data, column), 'event');
        const fromDb = row.get(column) ?? null;
        if (!same(fromEvents, fromDb)) {
          note(`${table}.${column}: events and database differ`, `${id}: events ${JSON.stringify(fromEvents)}, database ${JSON.stringify(fromDb)}`);
        }
      }
      for (const [column, value] of Object.entries(data)) {
        if (db!.columns.has(column) || value === null) continue;
        note(`${table}.${column}: in the events, not a column of the table`, `${id}: events ${JSON.stringify(value)}`);
      }
    }
  }
  for (const [what, { n, example }] of byColumn) {
    violations.push({ check: `events=db (${path})`, detail: `${what} for ${n} record${n === 1 ? '' : 's'}, e.g. ${example}` });
  }
  return violations;
}
