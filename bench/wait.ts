/**
 * The wait endpoint: time from the call to `{"ok":true}` after a write made directly upstream,
 * p50/p99, for each sync kind, against the lag a client without it would see in the same run.
 *
 *   node --import tsx bench/wait.ts [--writes 40]
 *
 * The service (api, sync and decoder roles) runs one Airtable and one Stripe sync against the
 * fakes at the real rate limits (Airtable 5 req/s per base, Stripe's test mode 25 req/s) with
 * the default poll intervals. For each kind, in turn:
 * - wait: a record is changed directly upstream, then `GET /api/wait/:id` is called; the time
 *   from the call to its answer. A SQL read right after the answer must see the change.
 * - poll (the peer): the same kind of change, then the database is polled every 10 ms until the
 *   row shows it; the time from the write: the lag a client without the endpoint sees (the
 *   sync's poll interval decides it). Writes are a random 0.3–1.3 s apart, so they do not fall
 *   into step with that interval.
 */
import pg from 'pg';
import { startFakeAirtable } from '../fakes/airtable/index.ts';
import { startFakeStripe } from '../fakes/stripe/index.ts';
import { api, arg, createAirtableSync, percentile, sleep, startPostgres, startServiceProcess, waitForFirstCycle } from './lib.ts';

const writes = arg('writes', 40);
const AIRTABLE_TOKEN = `patWAITBENCH00000.${'0123456789abcdef'.repeat(4)}`;
const STRIPE_KEY = 'sk_test_WAITBENCH00000000000000001';

const postgres = await startPostgres();
const airtable = await startFakeAirtable({ port: 0 });
airtable.addToken(AIRTABLE_TOKEN, { bases: '*' });
const base = airtable.createBase({ name: 'Wait bench' });
base.createTable('Items', [
  { name: 'Name', type: 'singleLineText' },
  { name: 'Amount', type: 'number', options: { precision: 0 } },
]);
const items = base.createRecords(
  'Items',
  Array.from({ length: 20 }, (_, i) => ({ Name: `Item ${i}`, Amount: i })),
);
const stripe = await startFakeStripe();
const stripeAccount = stripe.createAccount();
stripeAccount.generate({ seed: 3, customers: 20 });
stripe.addKey(STRIPE_KEY, { account: stripeAccount.id });
const customers = stripeAccount.all('customers').map((c) => c.id as string);

const svc = await startServiceProcess({
  controlUrl: await postgres.freshDatabase('ctl'),
  targetUrl: postgres.adminUrl,
  upstreams: `api.airtable.com=${airtable.url},api.stripe.com=${stripe.url}`,
  roles: 'api,sync,decoder',
});

interface Kind {
  name: string;
  syncId: string;
  token: string;
  reader: pg.Client;
  /** Changes one record upstream, as any client would; returns how to recognise it in SQL. */
  write(i: number): Promise<{ sql: string; params: unknown[] }>;
}

async function connectReader(url: string): Promise<pg.Client> {
  const reader = new pg.Client({ connectionString: url });
  await reader.connect();
  reader.on('error', () => undefined); // the server stops before it at the end
  return reader;
}

/** A write sent straight to a fake, as any client would. */
async function upstream(what: string, url: string, init: RequestInit): Promise<void> {
  const response = await fetch(url, init);
  if (!response.ok) throw new Error(`${what}: ${response.status} ${await response.text()}`);
}

async function airtableKind(): Promise<Kind> {
  const sync = await createAirtableSync(svc, base.id, AIRTABLE_TOKEN);
  await waitForFirstCycle(svc, sync.token, sync.syncId);
  const reader = await connectReader(sync.reader);
  return {
    name: 'Airtable',
    syncId: sync.syncId,
    token: sync.token,
    reader,
    async write(i) {
      const record = items[i % items.length]!;
      const name = `wait-${i}-${Date.now()}`;
      await upstream('Airtable update', `${airtable.url}/v0/${base.id}/Items`, {
        method: 'PATCH',
        headers: { authorization: `Bearer ${AIRTABLE_TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ records: [{ id: record.id, fields: { Name: name } }] }),
      });
      return { sql: 'SELECT 1 FROM items WHERE id = $1 AND name = $2', params: [record.id, name] };
    },
  };
}

async function stripeKind(): Promise<Kind> {
  const tenant = await api(svc.api, svc.adminToken, 'POST', '/api/accounts', { name: 'bench stripe' });
  const sync = await api(svc.api, tenant.api_token, 'POST', '/api/syncs', { kind: 'stripe', api_key: STRIPE_KEY });
  await waitForFirstCycle(svc, tenant.api_token, sync.id);
  const reader = await connectReader(sync.database.url);
  return {
    name: 'Stripe',
    syncId: sync.id,
    token: tenant.api_token,
    reader,
    async write(i) {
      const id = customers[i % customers.length]!;
      const name = `wait-${i}-${Date.now()}`;
      await upstream('Stripe update', `${stripe.url}/v1/customers/${id}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${STRIPE_KEY}`, 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ name }).toString(),
      });
      return { sql: 'SELECT 1 FROM customer WHERE id = $1 AND name = $2', params: [id, name] };
    },
  };
}

const ms = (v: number) => `${v.toFixed(0)} ms`;

async function measure(kind: Kind): Promise<void> {
  const waited: number[] = [];
  const polled: number[] = [];
  let stale = 0;
  // Interleaved, so both see the same machine; a pause between writes keeps Airtable's
  // 5 req/s for the sync's own passes (each write is one request too).
  for (let i = 0; i < writes * 2; i++) {
    const change = await kind.write(i);
    if (i % 2 === 0) {
      const called = performance.now();
      const answer = await api(svc.api, kind.token, 'GET', `/api/wait/${kind.syncId}?timeout=30000`);
      const took = performance.now() - called;
      if (answer.ok !== true) throw new Error(`${kind.name} wait answered ${JSON.stringify(answer)}`);
      if ((await kind.reader.query(change.sql, change.params)).rowCount !== 1) stale++;
      waited.push(took);
    } else {
      const written = performance.now();
      for (;;) {
        if ((await kind.reader.query(change.sql, change.params)).rowCount === 1) break;
        if (performance.now() - written > 30_000) throw new Error(`${kind.name} change ${i} never arrived`);
        await sleep(10);
      }
      polled.push(performance.now() - written);
    }
    // A random gap: the writes must not fall into step with the sync's poll interval.
    await sleep(300 + Math.random() * 1000);
  }
  const w50 = percentile(waited, 50);
  const w99 = percentile(waited, 99);
  const p50 = percentile(polled, 50);
  const p99 = percentile(polled, 99);
  console.log(`${kind.name}: ${writes} waits and ${writes} polls, interleaved`);
  console.log(
    `  wait, call to ok:          p50 ${ms(w50)}  p99 ${ms(w99)}  max ${ms(Math.max(...waited))}; SQL right after ok missed the change ${stale} times`,
  );
  console.log(`  poll SQL every 10 ms:      p50 ${ms(p50)}  p99 ${ms(p99)}  (write to row, the lag without the endpoint)`);
  console.log(`  wait / poll:               p50 ${(w50 / p50).toFixed(2)}  p99 ${(w99 / p99).toFixed(2)}`);
}

try {
  const kinds = [await airtableKind(), await stripeKind()];
  for (const kind of kinds) {
    await measure(kind);
    await kind.reader.end();
  }
  console.log(`upstream 429s: Airtable ${airtable.stats.byBase(base.id).rateLimited}, Stripe ${stripe.stats.byAccount(stripeAccount.id).rateLimited}`);
} finally {
  await svc.stop();
  await airtable.close();
  await stripe.close();
  await postgres.stop();
}
