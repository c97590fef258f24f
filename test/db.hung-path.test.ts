/**
 * Connections to a sync database over a path that hangs without closing (a relay that stops
 * passing bytes). Two holes, each of which held a sync, a backfill or the proxy after the
 * path healed: a new connection opened into the hang waited for the server's greeting with
 * no deadline, in every pool made from connectionConfig (a backfill's, a Stripe sync's
 * preparation, the provisioner's), and stayed dead after the heal; and once one statement
 * outlived its deadline, the pool's other idle connections, dead the same way, were handed
 * out one by one, each costing its user a whole deadline (a sync's is 5 min).
 */
import pg from 'pg';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { TcpRelay } from '../sim/tcp-relay.ts';
import { CONNECT_TIMEOUT_MS, connectionConfig } from '../src/db/connect.ts';
import { IdlePools } from '../src/db/idle-pools.ts';
import { serverAdminUrl } from './harness/postgres.ts';

let relay: TcpRelay;

test.before(async () => {
  const server = new URL(serverAdminUrl());
  relay = await TcpRelay.start({ host: server.hostname, port: Number(server.port) });
});

test.after(async () => {
  relay?.heal();
  await relay?.close();
});

/** The time `work` took to settle, and its error if it failed. */
async function timed(work: () => Promise<unknown>): Promise<{ ms: number; error?: Error }> {
  const from = Date.now();
  try {
    await work();
    return { ms: Date.now() - from };
  } catch (error) {
    return { ms: Date.now() - from, error: error as Error };
  }
}

test('a connection opened into a hung path fails at the connect deadline, and the next one after the heal works', async () => {
  const pool = new pg.Pool({ ...connectionConfig(relay.through(serverAdminUrl())), max: 1 });
  pool.on('error', () => undefined);
  try {
    relay.hang();
    const hung = await timed(() => pool.query('SELECT 1'));
    relay.heal();
    assert.ok(hung.error, 'the connect failed');
    assert.match(hung.error!.message, /timeout/i);
    assert.ok(hung.ms >= CONNECT_TIMEOUT_MS - 500 && hung.ms < CONNECT_TIMEOUT_MS + 10_000, `failed after ${hung.ms} ms`);
    const healed = await timed(() => pool.query('SELECT 1'));
    assert.is(healed.error, undefined, healed.error?.message);
  } finally {
    await pool.end();
  }
});

test('a statement past its deadline drops the idle connections made over the same path', async () => {
  const pools = new IdlePools({ max: 3, queryTimeoutMs: 1000 });
  try {
    const pool = pools.get(relay.through(serverAdminUrl()));
    // Three connections open and idle.
    await Promise.all([1, 2, 3].map(() => pool.query('SELECT pg_sleep(0.2)')));
    assert.is(pool.idleCount, 3);
    relay.hang();
    const hung = await timed(() => pool.query('SELECT 1'));
    assert.match(hung.error?.message ?? '', /Query read timeout/);
    relay.heal();
    // Before, the next statements were handed the other two dead connections in turn.
    assert.is(pool.idleCount, 0, 'the idle connections were dropped');
    const healed = await timed(() => pool.query('SELECT 1'));
    assert.is(healed.error, undefined, healed.error?.message);
    assert.ok(healed.ms < 5000, `${healed.ms} ms`);
  } finally {
    await pools.close();
  }
});

test.run();
