/**
 * Airtable's second limit: 50 requests/s per token across every base it reaches. Twelve
 * bases read with one token at their full 5 req/s would ask 60/s; the shared limiter counts
 * every request against its base and its token, so the fake (which enforces both limits
 * and locks a token out for 30 s past them) never answers 429.
 */
import pg from 'pg';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { AIRTABLE_RULE, AirtableClient } from '../src/airtable/client.ts';
import { Secret } from '../src/control/secrets.ts';
import { migrateControlDatabase } from '../src/db/migrate.ts';
import { startFakeAirtable, type FakeAirtable } from '../fakes/airtable/index.ts';
import { createLogger } from '../src/log.ts';
import { QuotaLimiter } from '../src/quota/limiter.ts';
import { freshDatabase } from './harness/postgres.ts';
import { peak } from './harness/quota.ts';

const TOKEN = 'patTOKENSHARED01.0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef';
let pool: pg.Pool;
let fake: FakeAirtable;

test.before(async () => {
  const url = await freshDatabase('quotatoken');
  await migrateControlDatabase(url, createLogger({ level: 'silent' }));
  pool = new pg.Pool({ connectionString: url, max: 8 });
  fake = await startFakeAirtable();
  fake.addToken(TOKEN, { bases: '*' });
});

test.after(async () => {
  await fake?.close();
  await pool?.end();
});

test('a request counts against its base and its token: neither window is ever exceeded', async () => {
  const limiter = new QuotaLimiter({ pool, marginMs: 20 });
  const token = { key: 'airtable-token:test-also', rule: { limit: 8, windowMs: 1000 } };
  // Four bases of 5 req/s each want 20/s; the token allows 8.
  await Promise.all(
    ['appA', 'appB', 'appC', 'appD'].map(async (base) => {
      for (let i = 0; i < 4; i++) await limiter.acquire(base, { limit: 5, windowMs: 1000 }, { kind: 'sync', also: token });
    }),
  );
  const { rows } = await pool.query<{ key: string; ms: number }>(
    'SELECT key, extract(epoch FROM at) * 1000 AS ms FROM quota_requests WHERE key = ANY($1) ORDER BY at',
    [['appA', 'appB', 'appC', 'appD', token.key]],
  );
  const times = (key: string) => rows.filter((r) => r.key === key).map((r) => Number(r.ms));
  assert.is(times(token.key).length, 16, 'every grant is logged under the token too');
  assert.ok(peak(times(token.key), 1000) <= 8, `token peak ${peak(times(token.key), 1000)} in 1 s`);
  for (const base of ['appA', 'appB', 'appC', 'appD']) assert.is(times(base).length, 4);
  // Logged under both keys at the same instant, so a re-stamp moves both.
  const bases = rows
    .filter((r) => r.key !== token.key)
    .map((r) => Number(r.ms))
    .sort((a, b) => a - b);
  assert.equal(
    times(token.key).sort((a, b) => a - b),
    bases,
  );
});

test('twelve bases read with one token at full speed draw no 429 from the fake', async () => {
  // The fake runs on this process's event loop with twelve busy clients, so its arrival
  // stamps jitter more than a network hop's: a wider margin than the default 40 ms.
  const limiter = new QuotaLimiter({ pool, marginMs: 150 });
  const bases = Array.from({ length: 12 }, (_, i) => {
    const base = fake.createBase({ name: `Base ${i}` });
    base.createTable('Items', [{ name: 'Name', type: 'singleLineText' }]);
    base.createRecords('Items', [{ Name: `item ${i}` }]);
    return base;
  });
  fake.stats.reset();
  const started = Date.now();
  const until = started + 4000;
  let done = 0;
  await Promise.all(
    bases.map(async (base) => {
      const client = new AirtableClient({
        baseUrl: fake.url,
        token: new Secret(TOKEN),
        baseId: base.id,
        limiter,
        // Turbo: the sync may take the base's whole 5 req/s.
        quota: { kind: 'sync', syncLimit: AIRTABLE_RULE.limit },
        attempts: 1,
      });
      const table = base.table('Items').id;
      while (Date.now() < until) {
        const page = await client.listPage(table);
        assert.is(page.records.length, 1);
        done++;
      }
    }),
  );
  assert.is(fake.stats.rateLimited, 0, `${fake.stats.rateLimited} of ${fake.stats.requests} requests answered 429`);
  // The token's 50/s is the bound, not the bases' 60/s (a first full window, then 50/s).
  const seconds = (Date.now() - started) / 1000;
  assert.ok(done >= 150 && done <= 50 * (seconds + 1), `${done} requests in ${seconds.toFixed(2)} s`);
});

test.run();
