/**
 * Full sweep against the real rate limit, then change lag, on one base.
 *
 *   node --import tsx bench/airtable-sync.ts [--records 100000] [--scale 10] [--turbo 0|1] [--edits 40] [--pings 0|1]
 *
 * The fake enforces Airtable's limit (5 req/s per base, 30 s lockout); `--scale N` runs
 * upstream time N times faster (limit 5N req/s, lockout 30/N s) and the service is told
 * the same, so a 333 s sweep takes 33 s. `--scale 1` is real time.
 *
 * 1. Sweep: the first full cycle's duration against the bound records / (100 x rate).
 * 2. Lag: edits made upstream while cycles keep running; time until each is in the
 *    database (real time, whatever the scale: change capture polls once a second).
 *    `--pings 1` gives the service a public URL, as a deployment has: Airtable's webhook
 *    pings it, and change capture reads the base when pinged (every 10 s between pings).
 */
import pg from 'pg';
import { startFakeAirtable } from '../fakes/airtable/index.ts';
import { arg, createAirtableSync, percentile, sleep, startPostgres, startServiceProcess, waitForFirstCycle } from './lib.ts';

const records = arg('records', 100_000);
const scale = arg('scale', 10);
const turbo = arg('turbo', 0) === 1;
const edits = arg('edits', 40);
const pings = arg('pings', 0) === 1;
const TOKEN = 'patBENCHBENCHBEN.0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef';

const postgres = await startPostgres();
const fake = await startFakeAirtable({ rateLimit: { perBasePerSecond: 5 * scale, perUserPerSecond: 50 * scale, lockoutMs: 30_000 / scale } });
fake.addToken(TOKEN, { bases: '*' });
const base = fake.createBase({ name: 'Bench' });
const tables = base.generate({
  seed: 7,
  tables: [
    { name: 'Projects', records: Math.round(records * 0.6) },
    { name: 'Tasks', records: Math.round(records * 0.3) },
    { name: 'People', records: records - Math.round(records * 0.6) - Math.round(records * 0.3) },
  ],
});
// Read before the sync starts: listing a whole table in-process blocks the fake for seconds,
// which would make it count queued requests as one burst.
const projects = tables[0]!;
const all = base.records(projects.id);
const svc = await startServiceProcess({
  controlUrl: await postgres.freshDatabase('ctl'),
  targetUrl: postgres.adminUrl,
  upstreams: `api.airtable.com=${fake.url}`,
  env: { TRIBUTARY_BENCH_TIME_SCALE: String(scale) },
  publicApi: pings,
});
try {
  const sync = await createAirtableSync(svc, base.id, TOKEN, { turbo });
  const rate = (turbo ? 5 : 3) * scale;
  const pages = tables.reduce((n, t) => n + Math.ceil(base.recordCount(t.id) / 100), 0);
  const seconds = await waitForFirstCycle(svc, sync.token, sync.syncId);
  const bound = records / (100 * rate);
  console.log(
    `Airtable full sweep, ${records.toLocaleString('en-US')} records (${pages} pages), ${turbo ? 'Turbo' : 'default'} share at ${rate / scale} req/s${scale === 1 ? '' : ` (time x${scale})`}${pings ? ', Airtable pings' : ''}`,
  );
  console.log(`  bound records/(100 x rate): ${(bound * scale).toFixed(1)} s${scale === 1 ? '' : ' (real-time equivalent)'}`);
  console.log(`  first full cycle:           ${(seconds * scale).toFixed(1)} s  (${(seconds / bound).toFixed(3)} of the bound)`);
  console.log(`  upstream 429s:              ${fake.stats.byBase(base.id).rateLimited}`);

  // 2. Change lag on the synced base, cycles still running.
  const reader = new pg.Client({ connectionString: sync.reader });
  await reader.connect();
  const textField = projects.fields.find((f) => f.type === 'singleLineText')!;
  const lags: number[] = [];
  for (let i = 0; i < edits; i++) {
    const record = all[(i * 7919) % all.length]!;
    const value = `edit-${i}-${Date.now()}`;
    base.updateRecord(projects.id, record.id, { [textField.name]: value });
    const edited = Date.now();
    for (;;) {
      const { rows } = await reader.query('SELECT 1 FROM projects WHERE id = $1 AND name = $2', [record.id, value]);
      if (rows.length) break;
      if (Date.now() - edited > 120_000) throw new Error(`edit ${i} never arrived`);
      await sleep(20);
    }
    lags.push(Date.now() - edited);
    await sleep(500);
  }
  await reader.end();
  console.log(`Change lag, upstream edit to database row, ${edits} edits on the ${records.toLocaleString('en-US')}-record base`);
  console.log(
    `  p50 ${(percentile(lags, 50) / 1000).toFixed(2)} s, p99 ${(percentile(lags, 99) / 1000).toFixed(2)} s, max ${(Math.max(...lags) / 1000).toFixed(2)} s`,
  );
  console.log(`  as a share of the full sweep time (the lag without change capture): p99 = ${(percentile(lags, 99) / 1000 / (seconds * scale)).toFixed(4)}`);
  console.log(`  upstream 429s, whole run: ${fake.stats.byBase(base.id).rateLimited}`);
} finally {
  await svc.stop();
  await fake.close();
  await postgres.stop();
}
