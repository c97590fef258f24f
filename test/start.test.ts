import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { readFile, stat, mkdtemp, rm } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freshDatabase, query } from './harness/postgres.ts';
import { freePort } from './harness/ports.ts';
import { repoRoot, spawnTributary, waitFor, type Spawned } from './harness/process.ts';
import { request, startHarnessStripe } from './harness/service.ts';
import type { FakeStripe } from '../fakes/stripe/index.ts';
import { SERVICE_NODE_FLAGS } from '../src/cli/node-flags.ts';
import { migrateControlDatabase } from '../src/db/migrate.ts';
import { fileLogger } from './harness/test-log.ts';

let dataDir: string;
let env: Record<string, string>;
let api: string;
let stripe: FakeStripe;

test.before(async () => {
  stripe = await startHarnessStripe();
  dataDir = await mkdtemp(path.join(os.tmpdir(), 'tributary-start-'));
  const [apiPort, proxyPort, eventsPort, pgPort] = await Promise.all([freePort(), freePort(), freePort(), freePort()]);
  env = {
    TRIBUTARY_DATA_DIR: dataDir,
    TRIBUTARY_API_PORT: String(apiPort),
    TRIBUTARY_PROXY_PORT: String(proxyPort),
    TRIBUTARY_EVENTS_PORT: String(eventsPort),
    TRIBUTARY_PG_PORT: String(pgPort),
    TRIBUTARY_UPSTREAMS: `api.stripe.com=${stripe.url}`,
    TRIBUTARY_PG_PROCESS_MEMORY_MB: '768',
    TRIBUTARY_PG_MAX_SLOT_WAL_KEEP_MB: '2048',
  };
  api = `http://127.0.0.1:${apiPort}`;
});
test.after(async () => {
  await stripe?.close();
  await rm(dataDir, { recursive: true, force: true });
});

async function start(): Promise<Spawned> {
  const proc = spawnTributary(['run'], env);
  await waitFor('healthz', async () => {
    if (proc.child.exitCode !== null) throw new Error(`exited early: ${proc.output()}`);
    const answer = await request(api, 'GET', '/healthz');
    return answer.status === 200 ? answer : undefined;
  });
  return proc;
}

const pgRunning = async () => existsSync(path.join(dataDir, 'pg', 'postmaster.pid'));

test('npm start is `tributary run`, and every way to start the service has the same Node flags', async () => {
  const read = (file: string) => readFile(path.join(repoRoot, file), 'utf8');
  const flags = SERVICE_NODE_FLAGS.join(' ');
  const pkg = JSON.parse(await read('package.json'));
  assert.is(pkg.scripts.start, `node ${flags} bin/tributary.js run`);
  assert.is((await read('bin/tributary.js')).split('\n')[0], `#!/usr/bin/env -S node ${flags}`);
  // The image gives them through NODE_OPTIONS, so a Procfile line run as its command has them too.
  const dockerfile = await read('docker/Dockerfile');
  assert.match(dockerfile, `NODE_OPTIONS="${flags}" `);
  assert.match(dockerfile, 'CMD ["node", "bin/tributary.js", "run"]');
});

let token: string;
let syncId: string;
let readerUrl: string;

test('a first start brings up the embedded PostgreSQL, generates its secrets and serves /healthz', async () => {
  const proc = await start();
  for (const file of ['secret-key', 'admin-token']) {
    const info = await stat(path.join(dataDir, file));
    assert.is(info.mode & 0o777, 0o600, `${file} is private`);
    assert.match(proc.output(), new RegExp(`${file}`), `the log says where ${file} is`);
  }
  assert.is(Buffer.from((await readFile(path.join(dataDir, 'secret-key'), 'utf8')).trim(), 'base64').length, 32);
  const adminToken = (await readFile(path.join(dataDir, 'admin-token'), 'utf8')).trim();
  assert.not.ok(proc.output().includes(adminToken), 'the admin token itself is not printed');

  const superuser = (await readFile(path.join(dataDir, 'pg-superuser-password'), 'utf8')).trim();
  const server = `postgres://postgres:${encodeURIComponent(superuser)}@127.0.0.1:${env.TRIBUTARY_PG_PORT}/postgres`;
  assert.equal(await query(server, 'SHOW wal_level'), [{ wal_level: 'logical' }]);
  const postmaster = (await readFile(path.join(dataDir, 'pg', 'postmaster.pid'), 'utf8')).split('\n')[0];
  const limits = process.platform === 'linux' ? await readFile(`/proc/${postmaster}/limits`, 'utf8') : undefined;
  const account = await request(api, 'POST', '/api/accounts', { token: adminToken, body: { name: 'persist' } });
  token = account.body.api_token;
  const sync = await request(api, 'POST', '/api/syncs', { token, body: { kind: 'stripe', api_key: 'sk_test_persist123' } });
  assert.is(sync.status, 201, sync.text);
  syncId = sync.body.id;
  readerUrl = sync.body.database.url;
  assert.equal(await query(readerUrl, 'SELECT count(*)::int AS n FROM _sync_meta'), [{ n: 1 }]);
  // The embedded server bounds the WAL its slots keep, as configured, and the pool shows it with its free disk.
  assert.equal(await query(server, 'SHOW max_slot_wal_keep_size'), [{ max_slot_wal_keep_size: '2GB' }]);
  const pooled = await waitFor('the free disk in the pool', async () => {
    const [member] = (await request(api, 'GET', '/api/servers', { token: adminToken })).body.data;
    return member?.free_disk_bytes > 0 ? member : undefined;
  });
  assert.equal([pooled.max_slot_wal_keep_size_mb, pooled.warnings], [2048, []]);
  const metrics = (await request(api, 'GET', '/metrics', { token: adminToken })).text;
  assert.match(metrics, new RegExp(`tributary_server_free_disk_bytes\\{server_id="${pooled.id}"\\} \\d+`));
  assert.match(metrics, new RegExp(`tributary_server_slot_wal_keep_bytes\\{server_id="${pooled.id}"\\} ${2048 * 1024 * 1024}`));

  proc.child.kill('SIGTERM');
  assert.is(await proc.exited, 0, 'SIGTERM is a clean exit');
  assert.not.ok(await pgRunning(), 'the embedded PostgreSQL stopped with the service');
  if (limits !== undefined) {
    // Each server process (the postmaster's children inherit it) is bounded as configured, hard and soft.
    const bytes = 768 * 2 ** 20;
    assert.match(limits, new RegExp(`Max data size\\s+${bytes}\\s+${bytes}\\s+bytes`));
  }
});

test('a restart keeps accounts and syncs', async () => {
  const proc = await start();
  const shown = await request(api, 'GET', `/api/syncs/${syncId}`, { token });
  assert.is(shown.status, 200, shown.text);
  assert.is(shown.body.database.url, readerUrl);
  assert.equal(await query(readerUrl, 'SELECT count(*)::int AS n FROM _sync_meta'), [{ n: 1 }]);
  proc.child.kill('SIGTERM');
  assert.is(await proc.exited, 0);
});

test('after a SIGKILL the next start finds PostgreSQL running and loses nothing', async () => {
  const first = await start();
  first.child.kill('SIGKILL');
  await first.exited;
  assert.ok(await pgRunning(), 'PostgreSQL outlives a killed service');
  const second = await start();
  assert.match(second.output(), /already running; reusing it/);
  assert.is((await request(api, 'GET', `/api/syncs/${syncId}`, { token })).status, 200);
  second.child.kill('SIGTERM');
  assert.is(await second.exited, 0);
  assert.not.ok(await pgRunning());
});

test('killed together with its PostgreSQL (a container killed), the next start takes the syncs at once', async () => {
  const superuser = (await readFile(path.join(dataDir, 'pg-superuser-password'), 'utf8')).trim();
  const control = `postgres://postgres:${encodeURIComponent(superuser)}@127.0.0.1:${env.TRIBUTARY_PG_PORT}/tributary`;
  const leases = async () =>
    (
      await query<{ owner: string | null; decoder: string | null }>(
        control,
        'SELECT lease_owner AS owner, decoder_lease_owner AS decoder FROM syncs WHERE id = $1',
        [syncId],
      )
    )[0]!;
  const first = await start();
  const held = await waitFor('the first process to hold the leases', async () => {
    const lease = await leases();
    return lease.owner && lease.decoder ? lease : undefined;
  });
  const postmaster = Number((await readFile(path.join(dataDir, 'pg', 'postmaster.pid'), 'utf8')).split('\n')[0]);
  first.child.kill('SIGKILL');
  process.kill(postmaster, 'SIGKILL');
  await first.exited;
  await waitFor('the killed PostgreSQL to be gone', async () => {
    try {
      process.kill(postmaster, 0);
      return undefined;
    } catch {
      return true;
    }
  });
  await new Promise((r) => setTimeout(r, 1000)); // its backends see the postmaster gone and exit
  const second = await start();
  try {
    assert.not.match(second.output(), /already running; reusing it/);
    // Well inside the 30 s for which the dead process's leases would otherwise hold the sync.
    const taken = await waitFor(
      'the new process to take the leases',
      async () => {
        const lease = await leases();
        return lease.owner && lease.decoder && lease.owner !== held.owner && lease.decoder !== held.decoder ? lease : undefined;
      },
      10_000,
    );
    assert.ok(taken.owner);
    assert.match(second.output(), /released the leases of processes that stopped with the embedded PostgreSQL/);
  } finally {
    second.child.kill('SIGTERM'); // a failed check must not leave it running
  }
  assert.is(await second.exited, 0);
});

test('with DATABASE_URL no embedded server starts, and a failed migration stops the start loudly', async () => {
  const control = await freshDatabase('ctl');
  const dir = await mkdtemp(path.join(os.tmpdir(), 'tributary-ext-'));
  const external = { ...env, TRIBUTARY_DATA_DIR: dir, DATABASE_URL: control, TRIBUTARY_API_PORT: String(await freePort()) };
  // A control database whose recorded migration differs from sql/: refusing is the only safe move.
  await migrateControlDatabase(control, fileLogger());
  await query(control, "UPDATE migrations SET hash = 'edited-after-it-ran' WHERE name = 'control'");
  const proc = spawnTributary(['run'], external);
  const code = await proc.exited;
  assert.is.not(code, 0, 'the start fails');
  assert.match(proc.output(), /[Hh]ash/, proc.output());
  assert.not.ok(existsSync(path.join(dir, 'pg')), 'no embedded PostgreSQL was made');
  await rm(dir, { recursive: true, force: true });
});

test('--roles runs a subset and refuses unknown roles', async () => {
  const bad = spawnTributary(['run', '--roles', 'api,teleport'], env);
  assert.is(await bad.exited, 1);
  assert.match(bad.output(), /unknown role "teleport"/);

  const proc = spawnTributary(['run', '--roles', 'api'], env);
  await waitFor('healthz', async () => ((await request(api, 'GET', '/healthz')).status === 200 ? true : undefined));
  const proxy = await fetch(`http://127.0.0.1:${env.TRIBUTARY_PROXY_PORT}/healthz`).then(
    () => 'listening',
    () => 'closed',
  );
  assert.is(proxy, 'closed', 'the proxy role was not started');
  proc.child.kill('SIGTERM');
  assert.is(await proc.exited, 0);
});

test.run();
