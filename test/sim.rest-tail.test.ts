/**
 * The simulation's REST reader (sim/check/rest-events.ts), the log the other delivery paths
 * are checked against, on the real event REST interface: a read cut short by the service
 * going away must lose nothing, or the simulation blames the product for events it dropped.
 */
import http from 'node:http';
import { Writable } from 'node:stream';
import pg from 'pg';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { RestTail } from '../sim/check/rest-events.ts';
import { AccountStore } from '../src/control/accounts.ts';
import { SecretBox } from '../src/control/secrets.ts';
import { migrateControlDatabase } from '../src/db/migrate.ts';
import { EventAppender, type NewEvent } from '../src/events/append.ts';
import { EventBus } from '../src/events/bus.ts';
import { EventLogReader } from '../src/events/log.ts';
import { createEventsRestHandler, type EventsRestHandler } from '../src/events/rest/server.ts';
import { listen, type RunningServer } from '../src/http/listen.ts';
import { newSecretKey, newSyncId } from '../src/ids.ts';
import { createLogger } from '../src/log.ts';
import { freshDatabase } from './harness/postgres.ts';

const logger = createLogger({ level: 'warn', destination: new Writable({ write: (_chunk, _encoding, done) => done() }) });
let pool: pg.Pool;
let bus: EventBus;
let handler: EventsRestHandler;
let server: RunningServer;
let front: http.Server;
let frontUrl: string;
/** /fetch requests the front refuses with 503 from now on, after letting `passBeforeFailing` through. */
let passBeforeFailing = Infinity;
/** /fetch requests the front holds unanswered (a service waiting on a hung database path). */
let holdFetches = false;
let creds: { username: string; password: string };
const syncId = newSyncId();
let appender: EventAppender;

test.before(async () => {
  const url = await freshDatabase('simtail');
  await migrateControlDatabase(url, logger);
  pool = new pg.Pool({ connectionString: url, max: 5 });
  const accounts = new AccountStore(pool, new SecretBox(newSecretKey()));
  const made = await accounts.create('tail account');
  creds = { username: made.account.eventsUsername, password: made.eventsPassword.reveal() };
  bus = new EventBus({ url, logger });
  await bus.start();
  // Pages of three, so one read takes several requests per partition.
  handler = createEventsRestHandler({ pool, accounts, reader: new EventLogReader(pool), bus, logger, limits: { maxMessages: 3 } });
  server = await listen(handler, { host: '127.0.0.1', port: 0 });
  // In front of it, what a fault does to the service: requests refused part-way through a read.
  front = http.createServer((req, res) => {
    if (req.url === '/fetch' && holdFetches) {
      req.resume();
      return;
    }
    if (req.url === '/fetch' && passBeforeFailing-- <= 0) {
      res.writeHead(503, { 'content-type': 'application/json' }).end('{"error":"unavailable"}');
      req.resume();
      return;
    }
    const upstream = http.request({ host: '127.0.0.1', port: server.port, path: req.url, method: req.method, headers: req.headers }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => front.listen(0, '127.0.0.1', resolve));
  frontUrl = `http://127.0.0.1:${(front.address() as { port: number }).port}`;
  appender = new EventAppender({ pool, syncId, accountId: made.account.id });
  await appender.load();
});

test.after(async () => {
  front?.close();
  await handler?.close();
  await server?.close();
  await bus?.stop();
  await pool?.end();
});

let lsn = 1;
async function log(collection: string, count: number): Promise<string[]> {
  const events: NewEvent[] = Array.from({ length: count }, (_, i) => {
    const createdAt = new Date();
    const id = `${collection}-${lsn}-${i}`;
    const value = JSON.stringify({ collection, created_at: createdAt.toISOString(), id, table_db_name: collection, event: 'inserted', data: { id } });
    return { collection, recordId: id, eventKey: `${syncId}.${lsn}.${i}`, createdAt, value };
  });
  lsn += 1;
  await appender.append(events, `0/${(lsn * 256).toString(16).toUpperCase()}`);
  return events.map((e) => e.eventKey);
}

test('a read cut short by the service going away is read again in full', async () => {
  const logged = [...(await log('alpha', 7)), ...(await log('beta', 7))];
  const tail = new RestTail({ restUrl: frontUrl, ...creds }, `svc.${syncId}.`);
  // Three pages of alpha pass, then the service is away: the read fails part-way.
  passBeforeFailing = 3;
  let failed = false;
  await tail.next().catch(() => (failed = true));
  assert.ok(failed, 'the read failed part-way');
  passBeforeFailing = Infinity;
  const read = await tail.next();
  assert.equal(read.map((e) => e.key).sort(), [...logged].sort());
  // And from there on, only what is new.
  const more = await log('alpha', 2);
  assert.equal(
    (await tail.next()).map((e) => e.key),
    more,
  );
});

test('a read the end of the traffic gives up ends at once and moves no offset', async () => {
  // The simulation ends its tail when the traffic stops: a read held by a service that waits
  // on a hung database path (up to its 30 s deadline) kept the tail from stopping in time.
  const tail = new RestTail({ restUrl: frontUrl, ...creds }, `svc.${syncId}.`);
  const before = await tail.next();
  const logged = await log('alpha', 2);
  holdFetches = true;
  const stop = new AbortController();
  const reading = tail.next(stop.signal);
  setTimeout(() => stop.abort(new Error('the traffic stopped')), 200);
  const started = Date.now();
  const outcome = await reading.then(
    () => 'read',
    (error: Error) => error.message,
  );
  holdFetches = false;
  assert.is(outcome, 'the traffic stopped');
  assert.ok(Date.now() - started < 2000, `ended ${Date.now() - started} ms after it began`);
  assert.ok(before.length > 0, 'the events logged before were read');
  assert.equal(
    (await tail.next()).map((e) => e.key),
    logged,
  );
});

test.run();
