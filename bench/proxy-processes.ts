/**
 * The two processes bench/proxy.ts measures against, each alone on its event loop:
 *
 *   node --import tsx bench/proxy-processes.ts fake    a fake Airtable (no rate limit) with one small base (env: BENCH_TOKEN)
 *   node --import tsx bench/proxy-processes.ts proxy   the write-through proxy (env: DATABASE_URL,
 *       TRIBUTARY_TARGET_DATABASE_URL, TRIBUTARY_SECRET_KEY, TRIBUTARY_UPSTREAMS, PROXY_LIMITER=0|1)
 *
 * Each prints one JSON line when it is ready and runs until killed.
 */
import pg from 'pg';
import { loadConfig } from '../src/config.ts';
import { SecretBox } from '../src/control/secrets.ts';
import { SyncService } from '../src/control/sync-service.ts';
import { SyncStore } from '../src/control/syncs.ts';
import { startFakeAirtable } from '../src/fakes/airtable/index.ts';
import { listen } from '../src/http/listen.ts';
import { createLogger } from '../src/log.ts';
import { createProxyHandler } from '../src/proxy/server.ts';
import { QuotaLimiter } from '../src/quota/limiter.ts';

/** The token the fake accepts (bench/proxy.ts passes it). */
const BENCH_TOKEN = process.env.BENCH_TOKEN!;

async function fake(): Promise<void> {
  const airtable = await startFakeAirtable({ port: 0, rateLimit: false });
  airtable.addToken(BENCH_TOKEN, { bases: '*' });
  const base = airtable.createBase({ name: 'Bench' });
  base.createTable('Items', [
    { name: 'Name', type: 'singleLineText' },
    { name: 'Amount', type: 'number', options: { precision: 0 } },
  ]);
  base.addField('Items', { name: 'Double', type: 'formula', options: { formula: '{Amount} * 2' } });
  base.createRecords('Items', Array.from({ length: 10 }, (_, i) => ({ Name: `Item ${i}`, Amount: i + 1 })));
  process.stdout.write(`${JSON.stringify({ url: airtable.url, baseId: base.id, tableId: base.table('Items').id })}\n`);
}

async function proxy(): Promise<void> {
  const config = loadConfig(process.env);
  const logger = createLogger({ level: 'warn' });
  const pool = new pg.Pool({ connectionString: config.databaseUrl, max: 10 });
  const syncs = new SyncStore(pool, SecretBox.fromBase64(config.secretKeyBase64!));
  const syncService = new SyncService({ store: syncs, sharedServerUrl: config.targetDatabaseUrl!, logger });
  const handler = createProxyHandler({
    pool,
    syncs,
    syncService,
    limiter: process.env.PROXY_LIMITER === '1' ? new QuotaLimiter({ pool }) : undefined,
    upstreams: config.upstreams,
    logger,
  });
  const server = await listen(handler, { host: '127.0.0.1', port: 0 });
  process.stdout.write(`${JSON.stringify({ url: `http://127.0.0.1:${server.port}` })}\n`);
}

// A signal ends the process normally (so --cpu-prof can write its profile).
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => process.exit(0));

const mode = process.argv[2];
if (mode === 'fake') await fake();
else if (mode === 'proxy') await proxy();
else throw new Error('usage: proxy-processes.ts fake|proxy');
