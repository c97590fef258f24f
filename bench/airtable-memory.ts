/**
 * Memory: resident set of the service process while it syncs a large base.
 *
 *   node --import tsx bench/airtable-memory.ts [--records 1000000]
 *
 * The fake runs in this process with its rate limit off (and the service's limiter sped up
 * to match); the service runs alone in its
 * own, so its peak RSS (VmHWM) is its own. Compared with the size of the base's data as
 * JSON, the volume that flows through the service.
 */
import { startFakeAirtable } from '../fakes/airtable/index.ts';
import { arg, createAirtableSync, mb, startPostgres, startServiceProcess, waitForFirstCycle } from './lib.ts';

const records = arg('records', 1_000_000);
const TOKEN = 'patMEMORYMEMORYM.0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef';

const postgres = await startPostgres();
const fake = await startFakeAirtable({ rateLimit: false });
fake.addToken(TOKEN, { bases: '*' });
const base = fake.createBase({ name: 'Big' });
const [table] = base.generate({ seed: 11, tables: [{ name: 'Events', records }] });
// The size of the data as Airtable sends it, from one page (listing all of it here would cost GBs).
const page = (await (await fetch(`${fake.url}/v0/${base.id}/${table!.id}?pageSize=100`, { headers: { authorization: `Bearer ${TOKEN}` } })).json()) as {
  records: unknown[];
};
const bytesPerRecord = JSON.stringify(page.records).length / page.records.length;
const svc = await startServiceProcess({
  controlUrl: await postgres.freshDatabase('ctl'),
  targetUrl: postgres.adminUrl,
  upstreams: `api.airtable.com=${fake.url}`,
  // The fake has no limit here; the service's own limiter is sped up 1000x to match.
  env: { TRIBUTARY_BENCH_TIME_SCALE: '1000' },
});
try {
  const idle = svc.rss();
  const started = Date.now();
  const sync = await createAirtableSync(svc, base.id, TOKEN);
  let samples = 0;
  const seconds = await waitForFirstCycle(svc, sync.token, sync.syncId, () => samples++);
  const peak = svc.peakRss();
  const data = bytesPerRecord * records;
  console.log(`Airtable memory, ${records.toLocaleString('en-US')} records in one table (all field types), fake rate limit off`);
  console.log(`  service RSS idle ${mb(idle)}, peak while syncing ${mb(peak)} (target 300 MB: ${(peak / (300 * 1024 * 1024)).toFixed(2)} of it)`);
  console.log(`  base data as JSON ${mb(data)}; peak RSS is ${(peak / data).toFixed(3)} of it`);
  console.log(
    `  first full cycle ${seconds.toFixed(1)} s (${Math.round(records / seconds).toLocaleString('en-US')} records/s), wall ${((Date.now() - started) / 1000).toFixed(1)} s`,
  );
} finally {
  await svc.stop();
  await fake.close();
  await postgres.stop();
}
