/**
 * The hand-over from the decoder to readers in the same process: what the appender returns
 * is exactly what the log holds (both ways of writing a batch), and a feed answers only
 * when it can be sure, sending its reader to the log otherwise.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { AccountStore } from '../src/control/accounts.ts';
import { SecretBox } from '../src/control/secrets.ts';
import { migrateControlDatabase } from '../src/db/migrate.ts';
import { EventAppender } from '../src/events/append.ts';
import { EventBus } from '../src/events/bus.ts';
import { EventLogReader, type LoggedEvent } from '../src/events/log.ts';
import { freshDatabase } from './harness/postgres.ts';
import { fileLogger } from './harness/test-log.ts';

let control: pg.Pool;
let controlUrl: string;
let accountId: string;

test.before(async () => {
  controlUrl = await freshDatabase('ctl');
  await migrateControlDatabase(controlUrl, fileLogger());
  control = new pg.Pool({ connectionString: controlUrl });
  accountId = (await new AccountStore(control, SecretBox.fromBase64(randomBytes(32).toString('base64'))).create('feed')).account.id;
});
test.after(async () => control?.end());

// Values that need escaping one way or another: quotes, backslashes, escaped control characters, non-ASCII.
const VALUES = [
  { name: "it's" },
  { path: 'C:\\temp\\new', quote: '"q"' },
  { text: 'line one\nline two\ttab\r' },
  { text: "\\' and '\\", emoji: 'é😀', nul: '\u0000' },
];

const event = (recordId: string, n: number) => ({
  collection: 'things',
  recordId,
  eventKey: `syn_feed.0/${n}.0`,
  createdAt: new Date(Date.now() - 1000 + n),
  value: JSON.stringify({ id: recordId, n, ...VALUES[n % VALUES.length] }),
});

test('the events an append returns are the rows the log holds, for small and large batches', async () => {
  const syncId = 'syn_feed_append';
  const appender = new EventAppender({ pool: control, syncId, accountId, partitions: 3 });
  await appender.load();
  const reader = new EventLogReader(control);
  let n = 0;
  // 5 events go in one statement; 250 by COPY.
  for (const size of [5, 250, 1]) {
    const batch = Array.from({ length: size }, () => event(`rec${n % 7}`, n++));
    const returned = await appender.append(batch, `0/${(n * 16).toString(16)}`);
    const logged = await reader.bySeq(syncId, returned[0]!.seq === '1' ? '0' : String(BigInt(returned[0]!.seq) - 1n), { limit: 1000 });
    assert.equal(returned, logged);
  }
  const all = await reader.bySeq(syncId, '0', { limit: 1000 });
  assert.equal(
    all.map((e) => e.seq),
    Array.from({ length: 256 }, (_, i) => String(i + 1)),
  );
});

const logged = (from: number, to: number): LoggedEvent[] =>
  Array.from({ length: to - from + 1 }, (_, i) => ({
    syncId: 's',
    seq: String(from + i),
    topic: 'svc.s.t',
    partition: 0,
    offset: String(from + i - 1),
    recordId: `r${from + i}`,
    eventKey: `s.0/1.${from + i}`,
    createdAt: new Date(0),
    value: '{}',
  }));
const seqs = (answer: LoggedEvent[] | 'caught-up' | undefined) => (Array.isArray(answer) ? answer.map((e) => Number(e.seq)) : answer);

test('a feed hands over events in order, says when its reader is caught up, and otherwise sends it to the log', async () => {
  const bus = new EventBus({ url: controlUrl, logger: fileLogger() });
  const feed = bus.subscribeLogged('s', 10);
  // Nothing published yet: only the log knows.
  assert.is(feed.take(0n, 100), undefined);
  bus.publishLogged('s', logged(1, 3));
  assert.equal(seqs(feed.take(0n, 100)), [1, 2, 3]);
  assert.equal(seqs(feed.take(1n, 1)), [2]);
  assert.is(feed.take(3n, 100), 'caught-up');
  bus.publishLogged('s', logged(4, 6));
  assert.equal(seqs(feed.take(3n, 100)), [4, 5, 6]);
  // A reader behind what the feed holds reads the log.
  bus.publishLogged('s', logged(7, 9));
  assert.equal(seqs(feed.take(8n, 100)), [9]);
  assert.is(feed.take(3n, 100), undefined);
  // A batch that does not follow (a write whose commit was in doubt): the feed starts over from it.
  bus.publishLogged('s', logged(12, 13));
  assert.is(feed.take(9n, 100), undefined);
  assert.equal(seqs(feed.take(11n, 100)), [12, 13]);
  // Bounded: the oldest batches go, and a reader that needed them reads the log.
  for (let at = 14; at < 30; at += 4) bus.publishLogged('s', logged(at, at + 3));
  assert.is(feed.take(13n, 100), undefined);
  assert.equal(seqs(feed.take(25n, 100)), [26, 27, 28, 29]);
  // The decoder restarted: what follows may not follow; the reader looks at the log.
  bus.forgetLogged('s');
  assert.is(feed.take(29n, 100), undefined);
  feed.close();
  bus.publishLogged('s', logged(30, 30));
  assert.is(feed.take(29n, 100), undefined);
});

test.run();
