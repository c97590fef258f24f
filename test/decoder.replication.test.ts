/**
 * The replication session under the decoder, on a real server: every message in WAL order
 * even while a handler holds the stream back, acknowledgements that move the slot, a
 * failure that ends the session with its error, and a stop that ends it quietly.
 */
import net from 'node:net';
import pg from 'pg';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { PUBLICATION } from '../src/control/provisioner.ts';
import { ident, withClient, withDatabase } from '../src/db/sql.ts';
import { PgoutputParser, lsnToBigInt } from '../src/decoder/pgoutput.ts';
import { type ReplicationHandlers, ReplicationStream } from '../src/decoder/replication.ts';
import { freshDatabase, serverAdminUrl } from './harness/postgres.ts';
import { startSecondServer } from './harness/second-server.ts';

let url: string;
let pool: pg.Pool;
let slotCount = 0;

test.before(async () => {
  url = await freshDatabase('repl');
  pool = new pg.Pool({ connectionString: url, max: 2 });
  await pool.query('CREATE TABLE t (id int PRIMARY KEY, v text)');
  await pool.query(`CREATE PUBLICATION ${PUBLICATION} FOR TABLE t`);
});

test.after(async () => {
  await pool?.end();
});

async function newSlot(): Promise<string> {
  const slot = `repl_test_${++slotCount}`;
  await pool.query("SELECT pg_create_logical_replication_slot($1, 'pgoutput')", [slot]);
  return slot;
}

const command = (slot: string) => `START_REPLICATION SLOT ${ident(slot)} LOGICAL 0/0 (proto_version '1', publication_names '${PUBLICATION}')`;

/** A session on `slot`; handlers not given do nothing. */
const streamOn = (slot: string, handlers: Partial<ReplicationHandlers> = {}, connectionString = url) =>
  new ReplicationStream({
    databaseUrl: connectionString,
    command: command(slot),
    handlers: { data: () => undefined, keepalive: () => undefined, ...handlers },
  });

/** Whether a session is reading the slot. */
async function slotActive(slot: string): Promise<boolean> {
  const { rows } = await pool.query<{ active: boolean }>('SELECT active FROM pg_replication_slots WHERE slot_name = $1', [slot]);
  return rows[0]!.active;
}

/** The error `promise` rejects with; fails if it resolves. */
async function rejection(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected a rejection, but it resolved');
}

async function until(check: () => boolean | Promise<boolean>, what: string, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

test('hands over every message in order while a slow handler holds the stream back', async () => {
  const slot = await newSlot();
  await pool.query("INSERT INTO t SELECT g, repeat('x', 500) FROM generate_series(1, 2000) g");
  const parser = new PgoutputParser();
  const ids: number[] = [];
  let pending = 0;
  let concurrent = 0;
  const stream = streamOn(slot, {
    data: (payload) => {
      const message = parser.parse(payload);
      assert.is(pending, 0, 'a message was handed over while a handler was pending');
      if (message.tag === 'insert') ids.push(Number(message.next[0]));
      // Every 100th row holds the stream back for a while.
      if (ids.length % 100 !== 0 || message.tag !== 'insert') return undefined;
      pending++;
      concurrent = Math.max(concurrent, pending);
      return new Promise((resolve) =>
        setTimeout(() => {
          pending--;
          resolve();
        }, 5),
      );
    },
  });
  const running = stream.run();
  await until(() => ids.length === 2000, '2000 inserts');
  assert.equal(
    ids,
    Array.from({ length: 2000 }, (_, i) => i + 1),
  );
  assert.is(concurrent, 1);
  assert.ok(stream.arrived >= 2002, `arrived ${stream.arrived}`); // begin, 2000 inserts, commit (plus relation)
  await stream.stop();
  await running; // a stop ends the session quietly
});

test('an acknowledgement moves the slot; a keepalive carries the server position', async () => {
  const slot = await newSlot();
  await pool.query("INSERT INTO t VALUES (100001, 'a') ON CONFLICT (id) DO UPDATE SET v = excluded.v");
  const parser = new PgoutputParser();
  let endLsn: string | undefined;
  let keepaliveLsn: string | undefined;
  const stream = streamOn(slot, {
    data: (payload) => {
      const message = parser.parse(payload);
      if (message.tag === 'commit') endLsn = message.endLsn;
      return undefined;
    },
    // The server's first keepalive can come before the commit: a logical sender's keepalive
    // carries the position it has decoded up to, which starts at the slot's old position. Only
    // one sent after the commit, in stream order, must carry at least the commit's end.
    keepalive: (lsn) => {
      if (endLsn !== undefined) keepaliveLsn = lsn;
    },
  });
  const running = stream.run();
  await until(() => endLsn !== undefined, 'the commit');
  stream.acknowledge(endLsn!);
  const confirmed = async () => {
    const { rows } = await pool.query<{ lsn: string }>('SELECT confirmed_flush_lsn::text AS lsn FROM pg_replication_slots WHERE slot_name = $1', [slot]);
    return rows[0]!.lsn;
  };
  await until(async () => lsnToBigInt(await confirmed()) >= lsnToBigInt(endLsn!), "the slot to move to the commit's end");
  assert.is(await confirmed(), endLsn!, 'confirmed = the acknowledged end position, exactly');
  // When the acknowledgement reaches the server before it has caught up, the next keepalive is
  // the periodic one, at half of wal_sender_timeout (60 s here): the deadline is past that.
  await until(() => keepaliveLsn !== undefined, 'a keepalive after the commit', 45_000);
  assert.ok(lsnToBigInt(keepaliveLsn!) >= lsnToBigInt(endLsn!), `keepalive ${keepaliveLsn} before ${endLsn}`);
  await stream.stop();
  await running;
});

test('a server with a session that confirms its keepalives stops at once (pg_ctl stop -m fast)', async () => {
  // A server shutting down waits until each WAL sender's client confirms exactly the position
  // it was sent; a confirmation one byte past it kept the server from stopping at all.
  const server = await startSecondServer();
  try {
    const db = server.databaseUrl('postgres');
    await withClient(db, async (client) => {
      await client.query('CREATE TABLE t (id int PRIMARY KEY, v text)');
      await client.query(`CREATE PUBLICATION ${PUBLICATION} FOR TABLE t`);
      await client.query("SELECT pg_create_logical_replication_slot('stop_test', 'pgoutput')");
      await client.query("INSERT INTO t VALUES (1, 'a')");
    });
    let keepalives = 0;
    // What the decoder does when idle: confirm each keepalive's position.
    const stream: ReplicationStream = streamOn(
      'stop_test',
      {
        keepalive: (lsn) => {
          keepalives++;
          stream.acknowledge(lsn);
        },
      },
      db,
    );
    const running = stream.run();
    running.catch(() => undefined); // the server ends the session as it stops
    await until(() => keepalives > 0, 'a keepalive', 20_000);
    const started = Date.now();
    await server.pause();
    const seconds = (Date.now() - started) / 1000;
    // Without the exact position pg_ctl gives up after its 60 s and the server is still up.
    assert.ok(seconds < 20, `the server took ${seconds.toFixed(1)} s to stop`);
    await stream.stop();
  } finally {
    await server.stop();
  }
});

test('an idle session is pinged when silent, answers, and outlives its silence bound', async () => {
  const slot = await newSlot();
  let keepalives = 0;
  const stream = new ReplicationStream({
    databaseUrl: url,
    command: command(slot),
    silenceMs: 1500,
    handlers: { data: () => undefined, keepalive: () => void keepalives++ },
  });
  let ended: string | undefined;
  const running = stream.run().then(
    () => (ended = 'resolved'),
    (error: Error) => (ended = error.message),
  );
  await new Promise((r) => setTimeout(r, 5000));
  assert.is(ended, undefined, `the idle session was given up (${keepalives} keepalives)`);
  assert.ok(keepalives >= 3, `${keepalives} keepalives in 5 s`);
  await stream.stop();
  await running;
});

test('fail() and a throwing handler end the session with their error; the slot is free again', async () => {
  const slot = await newSlot();
  const failing = streamOn(slot);
  const run1 = failing.run();
  // Connected and streaming once the slot shows an active reader.
  const active = () => slotActive(slot);
  await until(active, 'the slot to be read');
  failing.fail(new Error('log write failed'));
  assert.match((await rejection(run1)).message, /log write failed/);
  await until(async () => !(await active()), 'the slot to be released');

  const throwing = streamOn(slot, {
    data: () => {
      throw new Error('bad message');
    },
  });
  // Its end is awaited from the start: the insert's change can reach the session, and end it,
  // before the insert's own answer reaches the test.
  const run2 = rejection(throwing.run());
  await pool.query("INSERT INTO t VALUES (100002, 'b')");
  assert.match((await run2).message, /bad message/);
});

test('a rejected handler promise ends the session with its error', async () => {
  const slot = await newSlot();
  const stream = streamOn(slot, { data: () => Promise.reject(new Error('flush failed')) });
  const running = rejection(stream.run()); // as above: it may end before the insert answers
  await pool.query("INSERT INTO t VALUES (100003, 'c')");
  assert.match((await running).message, /flush failed/);
});

test('a server that ends the session (slot dropped by an admin) is a failure, not a quiet end', async () => {
  const slot = await newSlot();
  const stream = streamOn(slot);
  const ended = rejection(stream.run()); // settles while the test still waits below
  await until(async () => {
    const { rows } = await pool.query<{ pid: number | null }>('SELECT active_pid AS pid FROM pg_replication_slots WHERE slot_name = $1', [slot]);
    return rows[0]?.pid != null;
  }, 'the slot to be read');
  const admin = new pg.Client({ connectionString: withDatabase(serverAdminUrl(), 'postgres') });
  await admin.connect();
  try {
    await admin.query('SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1', [slot]);
  } finally {
    await admin.end();
  }
  assert.match((await ended).message, /terminating connection/);
});

test('a stop or a failure while the session is still connecting ends it at once', async () => {
  const slot = await newSlot();
  // A server that accepts connections and never answers: connect() would wait forever.
  const silent = net.createServer(() => undefined);
  await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
  const port = (silent.address() as net.AddressInfo).port;
  const silentUrl = `postgres://x:y@127.0.0.1:${port}/db`;
  try {
    for (const end of ['stop', 'fail'] as const) {
      for (const target of [url, silentUrl]) {
        const stream = streamOn(slot, {}, target);
        const running = stream.run();
        const outcome = running.then(
          () => 'resolved',
          (error: Error) => error.message,
        );
        const started = Date.now();
        if (end === 'stop') await stream.stop();
        else stream.fail(new Error('ended while connecting'));
        const result = await Promise.race([outcome, new Promise((r) => setTimeout(() => r('still running'), 3000))]);
        assert.is(result, end === 'stop' ? 'resolved' : 'ended while connecting', `${end} on ${target === url ? 'the server' : 'a silent server'}`);
        assert.ok(Date.now() - started < 2000, `${end} took ${Date.now() - started} ms`);
      }
    }
  } finally {
    silent.close();
  }
  // The slot is free for the next reader.
  const next = streamOn(slot);
  const running = next.run();
  await until(() => slotActive(slot), 'the slot to be read again');
  await next.stop();
  await running;
});

test.run();
