/**
 * The proxy as bench/proxy.ts measures it, alone in its process (main.ts serves the same
 * handler on TRIBUTARY_PROXY_PORT):
 *
 *   node --import tsx bench/proxy-process.ts proxy   (env: DATABASE_URL, TRIBUTARY_TARGET_DATABASE_URL,
 *       TRIBUTARY_SECRET_KEY, TRIBUTARY_UPSTREAMS, PROXY_LIMITER=0|1)
 *
 * Prints one JSON line when it is ready and runs until a signal.
 */
import pg from 'pg';
import { loadConfig } from '../src/config.ts';
import { SecretBox } from '../src/control/secrets.ts';
import { ServerPool } from '../src/control/servers.ts';
import { SyncService } from '../src/control/sync-service.ts';
import { SyncStore } from '../src/control/syncs.ts';
import { listen } from '../src/http/listen.ts';
import { createLogger } from '../src/log.ts';
import { createProxyHandler } from '../src/proxy/server.ts';
import { QuotaLimiter } from '../src/quota/limiter.ts';
import { builtInKinds } from '../src/kinds/built-in.ts';

async function proxy(): Promise<void> {
  const config = loadConfig(process.env);
  const logger = createLogger({ level: 'warn' });
  const pool = new pg.Pool({ connectionString: config.databaseUrl, max: 10 });
  const box = SecretBox.fromBase64(config.secretKeyBase64!);
  const syncs = new SyncStore(pool, box);
  const servers = new ServerPool({ pool, box, configuredUrl: config.targetDatabaseUrl!, logger });
  const syncService = new SyncService({ store: syncs, servers, defaultRegion: config.defaultRegion, logger, kinds: builtInKinds() });
  const handler = createProxyHandler({
    kinds: builtInKinds(),
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
if (mode === 'proxy') await proxy();
else throw new Error('usage: proxy-process.ts proxy');
