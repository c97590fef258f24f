/**
 * Ingest ceiling: how fast records go from Airtable pages into PostgreSQL, against a bare
 * COPY of the same rows into the same table shape, in the same run.
 *
 *   node --import tsx bench/airtable-ingest.ts [--records 100000]
 *
 * 1. end to end: the sweep (HTTP listing from the fake in its own process, conversion,
 *    upsert) with the fake's rate limit off;
 * 2. processing only: the same pages already in memory, converted and upserted;
 * 3. re-sweep of unchanged data (what every later cycle does);
 * 4. the physical reference: COPY of the converted rows.
 */
import { PUBLIC_SCHEMAS } from '../src/syncdb/schemas.ts';
import { spawn } from 'node:child_process';
import path from 'node:path';
import pg from 'pg';
import { from as copyFrom } from 'pg-copy-streams';
import { AirtableClient } from '../src/airtable/client.ts';
import { mapBase } from '../src/airtable/schema.ts';
import { sweepTable } from '../src/airtable/sweep.ts';
import { prepareRebuild } from '../src/writer/swap.ts';
import { builtTable, rowOf, shapeOf } from '../src/airtable/tables.ts';
import type { AirtableRecord } from '../src/airtable/types.ts';
import { provisionDatabase } from '../src/control/provisioner.ts';
import { Secret } from '../src/control/secrets.ts';
import { AIRTABLE_DEFAULT_SETTINGS } from '../src/airtable/settings.ts';
import { withDatabase } from '../src/db/sql.ts';
import { newDatabaseName } from '../src/ids.ts';
import { createLogger } from '../src/log.ts';
import { copyLine } from '../src/writer/copy.ts';
import { createTableStatements } from '../src/writer/shape.ts';
import { freePort } from '../test/harness/ports.ts';
import { arg, root, startPostgres } from './lib.ts';

const records = arg('records', 100_000);
const logger = createLogger({ level: 'warn' });

async function startFakeProcess(count: number) {
  const port = await freePort();
  const child = spawn(
    process.execPath,
    [path.join(root, 'bin', 'tributary.js'), 'fake', 'airtable', '--port', String(port), '--records', String(count), '--no-rate-limit'],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  let out = '';
  for await (const chunk of child.stdout!) {
    out += chunk;
    if (out.trim().endsWith('}')) break;
  }
  const summary = JSON.parse(out) as { url: string; token: string; baseId: string };
  return { ...summary, stop: () => child.kill('SIGTERM') };
}

async function main() {
  const postgres = await startPostgres();
  const fake = await startFakeProcess(records);
  const name = newDatabaseName();
  await provisionDatabase({ adminUrl: postgres.adminUrl, name, role: `${name}_ro` }, 'bench-password', logger);
  const db = new pg.Pool({ connectionString: withDatabase(postgres.adminUrl, name), max: 4 });
  const client = new AirtableClient({ baseUrl: fake.url, token: new Secret(fake.token), baseId: fake.baseId });
  const mappings = mapBase(await client.schema(), AIRTABLE_DEFAULT_SETTINGS);
  const context = { airtable: client, db, schemas: PUBLIC_SCHEMAS, logger, skip: () => false };
  try {
    // 1. End to end.
    let started = performance.now();
    let listed = 0;
    for (const mapping of mappings) {
      await prepareRebuild(db, builtTable(mapping, PUBLIC_SCHEMAS));
      listed += (await sweepTable(context, mapping, 'public_swap', { deleteMissing: false })).listed;
    }
    const endToEnd = listed / ((performance.now() - started) / 1000);

    // 3. Re-sweep of the same, unchanged data.
    started = performance.now();
    for (const mapping of mappings) await sweepTable(context, mapping, 'public_swap', { deleteMissing: true });
    const resweep = listed / ((performance.now() - started) / 1000);

    // Pages in memory for the processing-only runs.
    const pages = new Map<string, AirtableRecord[][]>();
    for (const mapping of mappings) {
      const list: AirtableRecord[][] = [];
      let offset: string | undefined;
      do {
        const page = await client.listPage(mapping.tableId, { offset });
        list.push(page.records);
        offset = page.offset;
      } while (offset);
      pages.set(mapping.tableId, list);
    }

    // 2. Processing only: sweepTable itself, fed the same pages from memory instead of HTTP.
    const memory = (tableId: string) => {
      const list = pages.get(tableId)!;
      return {
        listPage: async (_table: string, options: { offset?: string } = {}) => {
          const index = Number(options.offset ?? 0);
          return { records: list[index]!, ...(index + 1 < list.length ? { offset: String(index + 1) } : {}) };
        },
      };
    };
    const conn = await db.connect();
    try {
      const process = async (suffix: string, schema: 'public' | 'public_swap', create: boolean) => {
        const tables = mappings.map((m) => ({ ...m, name: `${m.name}_${suffix}` }));
        if (create) for (const m of tables) for (const s of createTableStatements(shapeOf(m, schema))) await conn.query(s);
        const began = performance.now();
        for (const m of tables) {
          await sweepTable({ ...context, airtable: memory(m.tableId) }, m, schema, { deleteMissing: schema === 'public' });
        }
        return listed / ((performance.now() - began) / 1000);
      };
      const rebuildRate = await process('rebuild', 'public_swap', true);
      const upsertRate = await process('live', 'public', true);
      const unchangedRate = await process('live', 'public', false);

      // 4. COPY of rows converted beforehand: COPY gets only the load.
      const copied = mappings.map((m) => ({ ...m, name: `${m.name}_copy` }));
      for (const m of copied) for (const s of createTableStatements(shapeOf(m, 'public_swap'))) await conn.query(s);
      const lines = new Map(
        copied.map((m) => [
          m.tableId,
          pages
            .get(m.tableId)!
            .flat()
            .map((r) => copyLine(shapeOf(m, 'public_swap'), rowOf(m, r)))
            .join(''),
        ]),
      );
      started = performance.now();
      for (const m of copied) {
        const stream = conn.query(copyFrom(`COPY public_swap.${JSON.stringify(m.name)} FROM STDIN`));
        await new Promise<void>((resolve, reject) => {
          stream.on('finish', resolve);
          stream.on('error', reject);
          stream.end(lines.get(m.tableId));
        });
      }
      const copy = listed / ((performance.now() - started) / 1000);

      const fmt = (n: number) => `${Math.round(n).toLocaleString('en-US')} records/s`;
      console.log(`Airtable ingest, ${listed.toLocaleString('en-US')} records in ${mappings.length} tables (all field types), fake rate limit off`);
      console.log(`  ${'bare COPY of the same rows:'.padEnd(44)} ${fmt(copy).padStart(20)}  (1.00)`);
      const line = (label: string, rate: number) => console.log(`  ${label.padEnd(44)} ${fmt(rate).padStart(20)}  (${(rate / copy).toFixed(2)} of COPY)`);
      line('processing, rebuild (convert + COPY):', rebuildRate);
      line('processing, live table (convert + upsert):', upsertRate);
      line('processing, unchanged rows (convert + skip):', unchangedRate);
      line('end to end, first sweep (HTTP from the fake):', endToEnd);
      line('end to end, re-sweep of unchanged data:', resweep);
    } finally {
      conn.release();
    }
  } finally {
    await db.end();
    fake.stop();
    await postgres.stop();
  }
}

await main();
