/**
 * The simulation's events invariant itself, on hand-made events and rows: it compares every
 * column of every record, a column no event named counting as null, and forgives only
 * representation. (An exemption for columns new to a table once hid values that never
 * reached the stream.)
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { type Canonical, canonical, type TableRows } from '../sim/check/canonical.ts';
import { compareFold, type DeliveredEvent, foldEvents } from '../sim/check/events.ts';

const TEXT = 25;
const NUMERIC = 1700;
let n = 0;

function event(kind: 'inserted' | 'updated' | 'deleted', id: string, data: Record<string, unknown>, changes?: Record<string, unknown>): DeliveredEvent {
  const value = { collection: 'items', created_at: new Date().toISOString(), data, event: kind, id, table_db_name: 'items', ...(changes ? { changes } : {}) };
  return { key: `k${++n}`, value: JSON.stringify(value), where: `test #${n}` };
}

/** The table `items` as the database holds it: `columns` name → oid, rows as plain objects. */
function table(columns: Record<string, number>, rows: Array<Record<string, unknown>>): Map<string, TableRows> {
  const types = new Map(Object.entries(columns));
  const byId = new Map<string, Map<string, Canonical>>();
  for (const row of rows) byId.set(String(row.id), new Map([...types].map(([c, oid]) => [c, canonical(oid, row[c] ?? null)])));
  return new Map([['items', { columns: types, rows: byId }]]);
}

const checked = (events: DeliveredEvent[], db: Map<string, TableRows>) => {
  const fold = foldEvents('test', events);
  return [...fold.violations, ...compareFold('test', fold, db)].map((v) => v.detail);
};

test('a column the table gained, with a value no event carries, is a difference', () => {
  const events = [event('inserted', 'rec1', { id: 'rec1', name: 'a' })];
  const db = table({ id: TEXT, name: TEXT, note: TEXT }, [{ id: 'rec1', name: 'a', note: 'typed at once' }]);
  const found = checked(events, db);
  assert.is(found.length, 1, found.join('\n'));
  assert.match(found[0]!, /items\.note: events and database differ/);
  // Null in the new column: equal.
  assert.equal(checked(events, table({ id: TEXT, name: TEXT, note: TEXT }, [{ id: 'rec1', name: 'a', note: null }])), []);
  // The update the swap now makes: equal, and its change checked against a prior of null.
  const updated = [...events, event('updated', 'rec1', { id: 'rec1', name: 'a', note: 'typed at once' }, { note: null })];
  assert.equal(checked(updated, db), []);
});

test('an update whose changes miss a new column, or give it a prior other than null, is a violation', () => {
  const inserted = event('inserted', 'rec1', { id: 'rec1', name: 'a' });
  const db = table({ id: TEXT, name: TEXT, note: TEXT }, [{ id: 'rec1', name: 'b', note: 'x' }]);
  const missed = checked([inserted, event('updated', 'rec1', { id: 'rec1', name: 'b', note: 'x' }, { name: 'a' })], db);
  assert.ok(
    missed.some((d) => /note went from null to "x" but is not in changes/.test(d)),
    missed.join('\n'),
  );
  const prior = checked([inserted, event('updated', 'rec1', { id: 'rec1', name: 'b', note: 'x' }, { name: 'a', note: 'y' })], db);
  assert.ok(
    prior.some((d) => /changes\.note is "y", but the record held null/.test(d)),
    prior.join('\n'),
  );
});

test('a removed or renamed column whose value the events keep is a difference', () => {
  const events = [event('inserted', 'rec1', { id: 'rec1', label: 'kept' })];
  const renamed = checked(events, table({ id: TEXT, tag: TEXT }, [{ id: 'rec1', tag: 'kept' }]));
  assert.ok(
    renamed.some((d) => /items\.tag: events and database differ/.test(d)),
    renamed.join('\n'),
  );
  assert.ok(
    renamed.some((d) => /items\.label: in the events, not a column of the table/.test(d)),
    renamed.join('\n'),
  );
  const done = [...events, event('updated', 'rec1', { id: 'rec1', tag: 'kept' }, { label: 'kept', tag: null })];
  assert.equal(checked(done, table({ id: TEXT, tag: TEXT }, [{ id: 'rec1', tag: 'kept' }])), []);
});

test('only representation is forgiven: a number is not its text, a boolean not "true"', () => {
  const events = [event('inserted', 'rec1', { id: 'rec1', qty: 13, flag: true })];
  assert.equal(checked(events, table({ id: TEXT, qty: NUMERIC, flag: 16 }, [{ id: 'rec1', qty: '13', flag: true }])), [], 'numeric as node-pg text');
  const retyped = checked(events, table({ id: TEXT, qty: TEXT, flag: TEXT }, [{ id: 'rec1', qty: '13', flag: 'true' }]));
  assert.ok(
    retyped.some((d) => /items\.qty: events and database differ/.test(d)),
    retyped.join('\n'),
  );
  assert.ok(
    retyped.some((d) => /items\.flag: events and database differ/.test(d)),
    retyped.join('\n'),
  );
  const asText = checked([event('inserted', 'rec1', { id: 'rec1', qty: '13' })], table({ id: TEXT, qty: NUMERIC }, [{ id: 'rec1', qty: '13' }]));
  assert.is(asText.length, 1, 'an event holding text for a numeric column differs');
});

/** An event as a path delivers it after a lost slot: its key names its commit LSN (`sync.lsn.position`). */
function at(
  lsn: string,
  kind: 'inserted' | 'updated' | 'deleted' | 'read' | 'gap',
  id: string,
  data: Record<string, unknown>,
  changes?: Record<string, unknown>,
): DeliveredEvent {
  const value = { collection: 'items', created_at: new Date().toISOString(), data, event: kind, id, table_db_name: 'items', ...(changes ? { changes } : {}) };
  return { key: `syn_x.${lsn}.${++n}`, value: JSON.stringify(value), where: `test #${n}` };
}

test("a gap's marker: what came after the gap before it (webhooks) is excused, the gap's losses are dropped", () => {
  const db = table({ id: TEXT, name: TEXT }, [
    { id: 'rec1', name: 'changed in the gap' },
    { id: 'rec3', name: 'made in the gap' },
  ]);
  const gap = { gap: 'gap_x', commit_lsn: '0/500', resumed_lsn: '0/400', reason: 'missing', backfill: 'bf_x', detail: '', lost_at: '' };
  // On a webhook, per record: rec3's read and rec1's update overtake the marker (other lanes).
  const stream = [
    at('0/100', 'inserted', 'rec1', { id: 'rec1', name: 'a' }),
    at('0/110', 'inserted', 'rec2', { id: 'rec2', name: 'deleted in the gap' }),
    at('0/600', 'read', 'rec3', { id: 'rec3', name: 'made in the gap' }),
    at('0/450', 'updated', 'rec1', { id: 'rec1', name: 'changed in the gap' }, { name: 'changed before' }),
    at('0/500', 'gap', 'gap_x', gap),
  ];
  assert.equal(checked(stream, db), []);
  // Without the marker, the same stream is three violations and a record the database lost.
  const blind = checked(stream.slice(0, 4), db);
  assert.ok(
    blind.some((v) => /a read, but the events never had this record/.test(v)),
    blind.join('\n'),
  );
  assert.ok(
    blind.some((v) => /changes\.name is "changed before"/.test(v)),
    blind.join('\n'),
  );
  assert.ok(
    blind.some((v) => /in the events, not in the database/.test(v)),
    blind.join('\n'),
  );
  // A violation from before the gap's start is not excused by it.
  const early = checked([at('0/100', 'updated', 'rec1', { id: 'rec1', name: 'changed in the gap' }, { name: 'x' }), ...stream.slice(2)], db);
  assert.ok(
    early.some((v) => /updated, but the events never had this record/.test(v)),
    early.join('\n'),
  );
});

test.run();
