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
