/**
 * The event log itself: offsets per partition that never restart, records pinned to one
 * partition, and retention that drops whole days.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { AccountStore } from '../src/control/accounts.ts';
import { SecretBox } from '../src/control/secrets.ts';
import { migrateControlDatabase } from '../src/db/migrate.ts';
import { EventAppender, partitionOf } from '../src/events/append.ts';
import { dropExpiredEventPartitions, EventLogReader } from '../src/events/log.ts';
import { freshDatabase } from './harness/postgres.ts';
import { fileLogger } from './harness/test-log.ts';

let control: pg.Pool;
let accountId: string;
const DAY = 86_400_000;

test.before(async () => {
  const url = await freshDatabase('ctl');
  await migrateControlDatabase(url, fileLogger());
  control = new pg.Pool({ connectionString: url });
  accountId = (await new AccountStore(control, SecretBox.fromBase64(randomBytes(32).toString('base64'))).create('log')).account.id;
});
test.after(async () => control?.end());

const event = (recordId: string, n: number, createdAt = new Date()) => ({
  collection: 'things',
  recordId,
  eventKey: `k.${recordId}.${n}`,
  createdAt,
  value: JSON.stringify({ id: recordId, n }),
});

test('offsets count per partition; a record always lands in the same partition', async () => {
  const appender = new EventAppender({ pool: control, syncId: 'sy_parts', accountId, partitions: 4 });
  await appender.load();
  const ids = Array.from({ length: 40 }, (_, i) => `rec${i}`);
  await appender.append(
    ids.map((id) => event(id, 1)),
    '0/10',
  );
  await appender.append(
    ids.map((id) => event(id, 2)),
    '0/20',
  );
  const reader = new EventLogReader(control);
  let total = 0;
  for (let partition = 0; partition < 4; partition++) {
    const rows = await reader.byOffset('svc.sy_parts.things', partition, '0');
    total += rows.length;
    assert.equal(
      rows.map((r) => r.offset),
      rows.map((_, i) => String(i)),
      `partition ${partition} offsets are 0..n-1`,
    );
    for (const row of rows) assert.is(partitionOf(row.recordId, 4), partition);
    const perRecord = new Map<string, number[]>();
    for (const row of rows) perRecord.set(row.recordId, [...(perRecord.get(row.recordId) ?? []), (JSON.parse(row.value) as { n: number }).n]);
    for (const [, ns] of perRecord) assert.equal(ns, [1, 2], 'per-record order');
  }
  assert.is(total, 80);
  assert.equal(
    (await reader.bySeq('sy_parts', '0', { limit: 100 })).map((r) => r.seq),
    Array.from({ length: 80 }, (_, i) => String(i + 1)),
  );
});

test('a large batch (COPY) and a small one (one INSERT) log the same rows, whatever the text', async () => {
  // Over 100 events a batch goes by COPY: its rows are written as bytes, and must come back as
  // the INSERT's do, texts the COPY text format would have to escape included.
  const hostile = ['back\\slash', 'quote \' and "double"', 'tab\tnew\nline', 'é, 漢字, 🙂', '\\N', 'comma,{brace}', ''];
  const batch = (sync: string) =>
    Array.from({ length: 120 }, (_, i) => ({
      collection: 'things',
      recordId: `rec ${hostile[i % hostile.length]} ${i}`,
      eventKey: `${sync}.0/A.${i}`,
      createdAt: new Date(Date.UTC(2026, 0, 2, 3, 4, 5, i % 1000)),
      value: JSON.stringify({ id: i, text: hostile[i % hostile.length] }),
      ...(i % 5 === 0 ? { destinationId: `wh_${i}` } : {}),
    }));
  const rows = async (sync: string) =>
    (
      await control.query(
        `SELECT seq::text, topic, partition, "offset"::text, record_id, replace(event_key, $1, '') AS key, created_at, destination_id, value
           FROM events WHERE sync_id = $1 ORDER BY events.seq`,
        [sync],
      )
    ).rows;
  const copied = new EventAppender({ pool: control, syncId: 'sy_copied', accountId, partitions: 3 });
  await copied.load();
  await copied.append(batch('sy_copied'), '0/10');
  const inserted = new EventAppender({ pool: control, syncId: 'sy_inserted', accountId, partitions: 3 });
  await inserted.load();
  const all = batch('sy_inserted');
  for (let i = 0; i < all.length; i += 60) await inserted.append(all.slice(i, i + 60), `0/${i + 10}`);
  const a = await rows('sy_copied');
  const b = await rows('sy_inserted');
  assert.is(a.length, 120);
  assert.equal(
    a.map((r) => ({ ...r, topic: r.topic.replace('sy_copied', '') })),
    b.map((r) => ({ ...r, topic: r.topic.replace('sy_inserted', '') })),
  );
  // And as made: the value, the record id and the time to the millisecond.
  assert.equal(
    a.map((r) => [r.record_id, r.value, r.created_at.toISOString(), r.destination_id]),
    batch('x').map((e) => [e.recordId, e.value, e.createdAt.toISOString(), e.destinationId ?? null]),
  );
});

test('retention drops whole old days; offsets go on where they were', async () => {
  const appender = new EventAppender({ pool: control, syncId: 'sy_old', accountId });
  await appender.load();
  const now = new Date();
  await appender.append([event('recOld', 1, new Date(now.getTime() - 10 * DAY)), event('recOld', 2, new Date(now.getTime() - 10 * DAY))], '0/30');
  await appender.append([event('recNew', 1, now)], '0/40');
  const dropped = await dropExpiredEventPartitions(control, 7 * DAY, now);
  assert.ok(dropped.length >= 1, 'the ten-day-old partition went');
  const reader = new EventLogReader(control);
  const kept = await reader.byOffset('svc.sy_old.things', 0, '0');
  assert.equal(
    kept.map((r) => [r.recordId, r.offset]),
    [['recNew', '2']],
  );
  assert.equal(await reader.offsets('svc.sy_old.things', 0), { earliest: '2', next: '3' });

  // A restarted appender continues the offsets, though the early events are gone.
  const again = new EventAppender({ pool: control, syncId: 'sy_old', accountId });
  assert.equal(await again.load(), { lsn: '0/40', seq: '3' });
  await again.append([event('recNew', 2, now)], '0/50');
  assert.equal(
    (await reader.byOffset('svc.sy_old.things', 0, '0')).map((r) => r.offset),
    ['2', '3'],
  );
  assert.equal(await dropExpiredEventPartitions(control, 7 * DAY, now), [], 'nothing recent is dropped');
});

test.run();
