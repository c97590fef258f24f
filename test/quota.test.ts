import { test } from 'uvu';
import * as assert from 'uvu/assert';
import pg from 'pg';
import { migrateControlDatabase } from '../src/db/migrate.ts';
import { TributaryError } from '../src/errors.ts';
import { QuotaLimiter } from '../src/quota/limiter.ts';
import { freshDatabase } from './harness/postgres.ts';
import { peak } from './harness/quota.ts';
import { fileLogger } from './harness/test-log.ts';

let pools: pg.Pool[] = [];
let limiters: QuotaLimiter[] = [];
const rule = { limit: 5, windowMs: 1000 };

test.before(async () => {
  const url = await freshDatabase('quota');
  await migrateControlDatabase(url, fileLogger());
  // Two limiters on two pools stand for two processes sharing one quota.
  pools = [new pg.Pool({ connectionString: url }), new pg.Pool({ connectionString: url })];
  limiters = pools.map((pool) => new QuotaLimiter({ pool, marginMs: 50 }));
});
test.after(async () => {
  await Promise.all(pools.map((p) => p.end()));
});

test('two processes together never exceed the window, and the sync keeps to its share', async () => {
  const syncTimes: number[] = [];
  const clientTimes: number[] = [];
  const syncWorker = async (limiter: QuotaLimiter) => {
    for (let i = 0; i < 6; i++) {
      await limiter.acquire('appSHARED', rule, { kind: 'sync', syncLimit: 3 });
      syncTimes.push(Date.now());
    }
  };
  const clientBurst = async (limiter: QuotaLimiter) => {
    await new Promise((r) => setTimeout(r, 300));
    await Promise.all(
      Array.from({ length: 6 }, async () => {
        await limiter.acquire('appSHARED', rule, { kind: 'client' });
        clientTimes.push(Date.now());
      }),
    );
  };
  await Promise.all([syncWorker(limiters[0]!), syncWorker(limiters[1]!), clientBurst(limiters[1]!)]);
  assert.is(syncTimes.length + clientTimes.length, 18);
  // Grant times as the limiter recorded them (the database clock): what the upstream would see,
  // without the jitter of when each caller's promise happened to resume.
  const { rows } = await pools[0]!.query<{ ms: number; kind: string }>(
    "SELECT extract(epoch FROM at) * 1000 AS ms, kind FROM quota_requests WHERE key = 'appSHARED' ORDER BY at",
  );
  const all = rows.map((r) => Number(r.ms));
  const sync = rows.filter((r) => r.kind === 'sync').map((r) => Number(r.ms));
  assert.is(all.length, 18);
  assert.ok(peak(all, 1000) <= 5, `peak of ${peak(all, 1000)} requests in one second`);
  assert.ok(peak(sync, 1000) <= 3, `sync peak ${peak(sync, 1000)}`);
});

test('a waiting client goes before queued sync requests', async () => {
  const order: string[] = [];
  // Fill the window with sync requests, then queue more sync requests and one client.
  for (let i = 0; i < 3; i++) await limiters[0]!.acquire('appPRIO', rule, { kind: 'sync', syncLimit: 5 });
  const syncs = Array.from({ length: 4 }, (_, i) => limiters[0]!.acquire('appPRIO', rule, { kind: 'sync', syncLimit: 5 }).then(() => order.push(`sync${i}`)));
  await new Promise((r) => setTimeout(r, 20));
  const client = limiters[1]!.acquire('appPRIO', rule, { kind: 'client' }).then(() => order.push('client'));
  await Promise.all([...syncs, client]);
  assert.ok(order.indexOf('client') <= 2, `client was served at position ${order.indexOf('client')}: ${order.join(',')}`);
});

test('urgent sync requests (change capture) go before queued sweep requests', async () => {
  const order: string[] = [];
  for (let i = 0; i < 3; i++) await limiters[0]!.acquire('appURGENT', rule, { kind: 'sync', syncLimit: 3 });
  const sweeps = Array.from({ length: 3 }, (_, i) =>
    limiters[0]!.acquire('appURGENT', rule, { kind: 'sync', syncLimit: 3 }).then(() => order.push(`sweep${i}`)),
  );
  await new Promise((r) => setTimeout(r, 20));
  const urgent = limiters[1]!.acquire('appURGENT', rule, { kind: 'sync', syncLimit: 3, urgent: true }).then(() => order.push('urgent'));
  await Promise.all([...sweeps, urgent]);
  // A sweep with no slot in this window may take one first; after that, urgent goes next.
  assert.ok(order.indexOf('urgent') <= 1, order.join(','));
});

test('a bounded wait gives up with a clear error: a 503 the API shows, with Retry-After', async () => {
  for (let i = 0; i < 5; i++) await limiters[0]!.acquire('appFULL', rule, { kind: 'client' });
  try {
    await limiters[0]!.acquire('appFULL', rule, { kind: 'client', maxWaitMs: 100 });
    assert.unreachable('should have given up');
  } catch (error) {
    assert.match((error as Error).message, /quota for appFULL is exhausted/);
    // A key check that found its base's share full answered a bare 500 (found with four syncs of one base).
    assert.instance(error, TributaryError);
    const refused = error as TributaryError;
    assert.equal([refused.status, refused.expose], [503, true]);
    assert.ok(refused.retryAfterSeconds !== undefined && refused.retryAfterSeconds >= 1 && refused.retryAfterSeconds <= 2, String(refused.retryAfterSeconds));
  }
});

test('an abort signal ends the wait', async () => {
  for (let i = 0; i < 5; i++) await limiters[0]!.acquire('appABORT', rule, { kind: 'sync' });
  const controller = new AbortController();
  setTimeout(() => controller.abort(new Error('stopping')), 50);
  try {
    await limiters[0]!.acquire('appABORT', rule, { kind: 'sync', signal: controller.signal });
    assert.unreachable('should have been aborted');
  } catch (error) {
    assert.match((error as Error).message, /stopping/);
  }
});

async function grantTimes(key: string): Promise<number[]> {
  const { rows } = await pools[0]!.query<{ ms: number }>('SELECT extract(epoch FROM at) * 1000 AS ms FROM quota_requests WHERE key = $1 ORDER BY at', [key]);
  return rows.map((r) => Number(r.ms));
}

test('a 429 the upstream sent anyway widens the margin for that key; a request held up before it left is logged when it left', async () => {
  const limiter = new QuotaLimiter({ pool: pools[0]!, marginMs: 100 });
  for (let i = 0; i < 6; i++) await limiter.acquire('appCALM', rule, { kind: 'client' });
  limiter.refusedByUpstream('appWIDE');
  assert.is(limiter.marginFor('appWIDE'), 200);
  assert.is(limiter.marginFor('appCALM'), 100);
  for (let i = 0; i < 6; i++) await limiter.acquire('appWIDE', rule, { kind: 'client' });
  const calm = await grantTimes('appCALM');
  const wide = await grantTimes('appWIDE');
  // The sixth request waits for the first to leave the window plus the margin.
  assert.ok(calm[5]! - calm[0]! >= 1100 && calm[5]! - calm[0]! < 1190, `calm gap ${calm[5]! - calm[0]!}`);
  assert.ok(wide[5]! - wide[0]! >= 1200, `wide gap ${wide[5]! - wide[0]!}`);

  const grant = await limiter.acquire('appLATE', rule, { kind: 'client' });
  const logged = await grantTimes('appLATE');
  await new Promise((r) => setTimeout(r, 80));
  grant.sent();
  await new Promise((r) => setTimeout(r, 100));
  const restamped = await grantTimes('appLATE');
  assert.ok(restamped[0]! - logged[0]! >= 75, `moved by ${restamped[0]! - logged[0]!} ms`);
});

test('with a lockout, a request still out keeps its slot, and an answered one holds it a whole window after its answer', async () => {
  // The upstream counts a request when it arrives, at the latest when its answer begins. On a
  // slow path a request sent first can arrive beside ones sent a second later: where a 429
  // locks the key out, its slot must not lapse while it is out (seen as Airtable 429s when a
  // slow path turned fast again). Without a lockout (Stripe), the window and the margin do.
  const limiter = limiters[0]!;
  const locking = { ...rule, lockout: true };
  const started = Date.now();
  const at = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, started + ms - Date.now())));
  const fill = async (key: string, keyRule: typeof rule) => {
    const slow = await limiter.acquire(key, keyRule, { kind: 'client' });
    slow.sent();
    for (let i = 0; i < 4; i++) {
      const quick = await limiter.acquire(key, keyRule, { kind: 'client' });
      quick.sent();
      quick.answered();
    }
    return slow;
  };
  const slow = await fill('appOUT', locking);
  const plain = await fill('acctOUT', rule);
  /** How many of `n` requests are granted at once (each answered at once), and how many refused. */
  const burst = async (key: string, keyRule: typeof rule, n: number) => {
    const outcomes = [];
    for (let i = 0; i < n; i++) {
      outcomes.push(
        await limiter.acquire(key, keyRule, { kind: 'client', maxWaitMs: 0 }).then(
          (grant) => {
            grant.sent();
            grant.answered();
            return 'granted';
          },
          () => 'refused',
        ),
      );
    }
    return outcomes.filter((o) => o === 'granted').length;
  };
  // 1.3 s on, the four answered at once have left the window; the one still out has not.
  await at(1300);
  assert.is(await burst('appOUT', locking, 5), 4, 'the request still out holds its slot past the window');
  assert.is(await burst('acctOUT', rule, 5), 5, 'without a lockout, the window and the margin are the hold');
  await at(1800);
  slow.answered();
  plain.answered();
  // 2.45 s on, the four of the burst have left the window too; the slow one, answered at 1.8 s, holds its slot until 2.8 s.
  await at(2450);
  assert.is(await burst('appOUT', locking, 5), 4, 'the answered request holds its slot a window after its answer');
});

test('unverified requests: their allowance per window, a slot always left free, none while anyone waits, outside the sync share', async () => {
  const take = (key: string, limiter = limiters[0]!, maxWaitMs = 0) =>
    limiter.acquire(key, rule, { kind: 'unverified', unverified: 1, maxWaitMs }).then(
      () => true,
      () => false,
    );
  // An empty window: one, then no second until the first leaves the window.
  assert.is(await take('appUNV1'), true);
  assert.is(await take('appUNV1', limiters[1]), false, 'the allowance is one per window, across processes');
  assert.ok(await take('appUNV1', limiters[1], 1500), 'the next window has one again');
  const times = await grantTimes('appUNV1');
  assert.ok(times[1]! - times[0]! >= 1000, `unverified grants ${times[1]! - times[0]!} ms apart`);

  // The sync's share (3) does not count them: after one, the sync still has its three at once.
  assert.is(await take('appUNV2'), true);
  for (let i = 0; i < 3; i++) await limiters[0]!.acquire('appUNV2', rule, { kind: 'sync', syncLimit: 3, maxWaitMs: 0 });
  const { rows } = await pools[0]!.query<{ kind: string }>("SELECT kind FROM quota_requests WHERE key = 'appUNV2' ORDER BY at");
  assert.equal(
    rows.map((r) => r.kind),
    ['unverified', 'sync', 'sync', 'sync'],
  );
  // Never the last free slot of a window: a known client would find none.
  for (let i = 0; i < 4; i++) await limiters[0]!.acquire('appUNV3', rule, { kind: 'client' });
  assert.is(await take('appUNV3'), false, 'four of five taken: the last stays free for a known client');
  await limiters[0]!.acquire('appUNV3', rule, { kind: 'client', maxWaitMs: 0 });

  // A client queued for the key goes first: unverified requests do not take its slot.
  for (let i = 0; i < 5; i++) await limiters[0]!.acquire('appUNV4', rule, { kind: 'client' });
  const queued = limiters[1]!.acquire('appUNV4', rule, { kind: 'client' });
  await new Promise((r) => setTimeout(r, 100));
  const waiting = await pools[0]!.query("SELECT 1 FROM quota_waiting WHERE key = 'appUNV4'");
  assert.is(waiting.rowCount, 1, 'the client announced itself');
  assert.is(await take('appUNV4'), false);
  await queued;
});

test.run();
