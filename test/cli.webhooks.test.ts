/**
 * `tributary webhooks …` and `tributary backfills …` against the whole service (api, sync,
 * decoder, events) and an Airtable sync of the fake: a webhook made from the CLI receives the
 * reads of a backfill started from the CLI with --wait, which follows it on stderr and ends
 * with its JSON on stdout; lists are tables, refusals are the API's message with exit 1.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawnTributary, waitFor } from './harness/process.ts';
import { createAccount, createAirtableSync, loudSetUp, request, startTestService, type TestAccount, type TestService } from './harness/service.ts';

const BASE = 'appCCCCCCCCCCCCCC';
const TASKS = 40;
const PROJECTS = 1500;

let svc: TestService | undefined;
let account: TestAccount;
let syncId: string;
/** The sync database, as its owner: to hold a lock on a table while a backfill should stand still. */
let syncDatabase: string;
let receiver: http.Server;
let receiverUrl: string;
/** Every event POSTed to the receiver, parsed. */
const received: Array<{ event: string; id: string; collection: string }> = [];

test.before(
  loudSetUp(
    async () => {
      svc = await startTestService({
        config: { roles: ['api', 'sync', 'decoder', 'events'], webhookAllowPrivate: true },
        tunables: {
          airtable: { pollIntervalMs: 250, cycleGapMs: 250 },
          workerTickMs: 250,
          // Small chunks: the projects backfill lasts long enough to be seen running (and canceled).
          backfills: { chunkRows: 20, lookGapMs: 50 },
        },
      });
      account = await createAccount(svc, 'hooks-co');
      svc.airtable.base(BASE).generate({
        seed: 5,
        tables: [
          { name: 'Projects', records: PROJECTS },
          { name: 'Tasks', records: TASKS },
        ],
      });
      const sync = await createAirtableSync(svc, account, BASE);
      syncId = sync.id;
      syncDatabase = sync.adminUrl;
      receiver = http.createServer((req, res) => {
        let body = '';
        req.on('data', (chunk: Buffer) => (body += chunk.toString()));
        req.on('end', () => {
          received.push(JSON.parse(body));
          res.writeHead(204).end();
        });
      });
      await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
      receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks`;
    },
    () => svc,
  ),
);

test.after(async () => {
  receiver?.close();
  await svc?.stop();
});

/** Starts the CLI as the account; stdout and stderr apart (--wait writes progress to one, JSON to the other). */
function spawnCli(args: string[], token = account.token) {
  const proc = spawnTributary(args, { TRIBUTARY_URL: svc!.api, TRIBUTARY_TOKEN: token });
  const seen = { stdout: '', stderr: '' };
  proc.child.stdout!.on('data', (chunk: Buffer) => (seen.stdout += chunk.toString()));
  proc.child.stderr!.on('data', (chunk: Buffer) => (seen.stderr += chunk.toString()));
  return {
    seen,
    async done() {
      const code = await proc.exited;
      return { code, ...seen, output: `${seen.stdout}${seen.stderr}` };
    },
  };
}

const cli = (args: string[], token = account.token) => spawnCli(args, token).done();

/**
 * Holds a lock on a table of the sync database that a backfill's chunk cannot share (as a
 * long transaction of someone else's would): the backfill stays running, reading nothing,
 * until release() ends the transaction.
 */
async function holdTable(table: string): Promise<{ release(): Promise<void> }> {
  const client = new pg.Client({ connectionString: syncDatabase });
  await client.connect();
  await client.query('BEGIN');
  await client.query(`LOCK TABLE ${table} IN EXCLUSIVE MODE`);
  return {
    async release() {
      await client.query('COMMIT');
      await client.end();
    },
  };
}

/** An aligned table read back into records by its header's column starts. */
function readTable(output: string): Array<Record<string, string>> {
  const [header, ...rows] = output.trimEnd().split('\n');
  const starts = [...header!.matchAll(/\S+( \S+)?/g)].map((m) => ({ name: m[0], at: m.index }));
  return rows.map((row) => Object.fromEntries(starts.map((column, i) => [column.name, row.slice(column.at, starts[i + 1]?.at ?? row.length).trim()])));
}

const api = (method: string, route: string, body?: unknown) => request(svc!.api, method, route, { token: account.token, body });

test('every new command is in the overview and has its own help; a missing id is a usage error', async () => {
  const top = await cli(['--help']);
  assert.is(top.code, 0);
  const commands = ['list', 'show', 'create', 'delete', 'deliveries', 'replay']
    .map((c) => `webhooks ${c}`)
    .concat(['list', 'show', 'start', 'cancel'].map((c) => `backfills ${c}`));
  for (const command of commands) {
    assert.ok(top.stdout.includes(`tributary ${command} SYNC_ID`), `overview lists ${command}`);
    const own = await cli([...command.split(' '), '--help']);
    assert.is(own.code, 0, command);
    assert.match(own.stdout, new RegExp(`^tributary ${command} SYNC_ID`), `${command} --help starts with its usage`);
  }
  for (const [args, message] of [
    [['backfills', 'start'], 'tributary backfills start: name the sync'],
    [['backfills', 'cancel', 'syn_x'], 'tributary backfills cancel: name the backfill'],
    [['webhooks', 'show', 'syn_x'], 'tributary webhooks show: name the webhook'],
    [['webhooks', 'create', 'syn_x', '--topic', 'tasks'], 'tributary webhooks create: give the destination URL'],
    [['webhooks', 'create', 'syn_x', 'https://example.com'], 'tributary webhooks create: --topic is needed'],
    [['backfills', 'start', 'syn_x', '--interval', '1'], 'tributary backfills start: --interval goes with --wait'],
  ] as const) {
    const usage = await cli([...args]);
    assert.is(usage.code, 2, `${args.join(' ')}: ${usage.output}`);
    assert.ok(usage.stderr.startsWith(message), usage.stderr);
    assert.is(usage.stdout, '');
  }
});

let webhookId: string;

test('webhooks create prints the secret once; list is a table, show counts, deliveries pages', async () => {
  // A collection names its topic; a whole topic is taken as it is.
  const created = await cli(['webhooks', 'create', syncId, receiverUrl, '--topic', 'tasks']);
  assert.is(created.code, 0, created.output);
  const hook = JSON.parse(created.stdout);
  assert.match(hook.id, /^wh_/);
  assert.match(hook.secret, /^whsec_/);
  assert.equal(hook.topics, [`svc.${syncId}.tasks`]);
  webhookId = hook.id;
  const other = await cli(['webhooks', 'create', syncId, `${receiverUrl}/other`, '--topic', `svc.${syncId}.projects`, '--topic', 'tasks']);
  assert.is(other.code, 0, other.output);
  const second = JSON.parse(other.stdout);
  assert.equal(second.topics, [`svc.${syncId}.projects`, `svc.${syncId}.tasks`]);

  const table = await cli(['webhooks', 'list', syncId]);
  assert.is(table.code, 0, table.output);
  assert.match(table.stdout, /^ID +URL +TOPICS +STATE +CREATED\n/);
  const rows = readTable(table.stdout);
  assert.equal(
    rows.map((r) => [r.ID, r.URL, r.TOPICS]).sort(),
    [
      [hook.id, receiverUrl, `svc.${syncId}.tasks`],
      [second.id, `${receiverUrl}/other`, `svc.${syncId}.projects, svc.${syncId}.tasks`],
    ].sort(),
  );
  const json = await cli(['webhooks', 'list', syncId, '--json']);
  assert.equal(JSON.parse(json.stdout), (await api('GET', `/api/syncs/${syncId}/webhooks`)).body);

  // The secret is never shown again.
  const shown = await cli(['webhooks', 'show', syncId, hook.id]);
  assert.is(shown.code, 0, shown.output);
  assert.not.ok(shown.stdout.includes(hook.secret));
  assert.is(JSON.parse(shown.stdout).deliveries.exhausted, 0);
  const deliveries = await cli(['webhooks', 'deliveries', syncId, hook.id, '--status', 'exhausted']);
  assert.is(deliveries.code, 0, deliveries.output);
  assert.is(deliveries.stdout, 'ID  TOPIC  RECORD  STATUS  ATTEMPTS  LAST ANSWER  LAST ATTEMPT\n');
  const badStatus = await cli(['webhooks', 'deliveries', syncId, hook.id, '--status', 'lost']);
  assert.is(badStatus.code, 1);
  assert.match(badStatus.stderr, /^tributary webhooks deliveries: 400 invalid_request: .*status/);
  const replay = await cli(['webhooks', 'replay', syncId, hook.id]);
  assert.is(replay.code, 0, replay.output);
  assert.equal(JSON.parse(replay.stdout), { replayed: 0, ids: [] });

  // Deleted: gone from the list; a second delete is the API's 404.
  const deleted = await cli(['webhooks', 'delete', syncId, second.id]);
  assert.is(deleted.code, 0, deleted.output);
  assert.equal(JSON.parse(deleted.stdout), { id: second.id, deleted: true });
  assert.equal(
    readTable((await cli(['webhooks', 'list', syncId])).stdout).map((r) => r.ID),
    [hook.id],
  );
  const again = await cli(['webhooks', 'delete', syncId, second.id]);
  assert.is(again.code, 1);
  assert.is(again.stdout, '');
  assert.match(again.stderr, new RegExp(`^tributary webhooks delete: 404 not_found: webhook ${second.id}`));
  const foreign = await cli(['webhooks', 'create', syncId, receiverUrl, '--topic', 'svc.syn_someoneelse.tasks']);
  assert.is(foreign.code, 1);
  assert.match(foreign.stderr, /400 invalid_request: .*must be a topic of this sync/);
});

let webhookBackfill: string;

/**
 * The rows of each progress line of a one-collection backfill: lines reading `collection`, then
 * at most one (the last) saying it is finishing, every collection read (`finishing`: its rows).
 */
function progressCounts(done: { id: string }, collection: string, lines: string[]): { counts: number[]; finishing?: number } {
  const counts: number[] = [];
  let finishing: number | undefined;
  for (const [i, line] of lines.entries()) {
    const reading = new RegExp(`^${done.id}  running  ${collection} \\(1 of 1\\)  ([\\d,]+) rows?$`).exec(line);
    const last = new RegExp(`^${done.id}  running  finishing \\(1 collection read\\)  ([\\d,]+) rows?$`).exec(line);
    assert.ok(reading || (last && i === lines.length - 1), `a progress line: ${line}`);
    const rows = Number((reading ?? last)![1]!.replaceAll(',', ''));
    if (reading) counts.push(rows);
    else finishing = rows;
  }
  return { counts, finishing };
}

test('backfills start --wait: progress on stderr, the finished backfill on stdout; the webhook gets every row', async () => {
  const started = await cli(['backfills', 'start', syncId, '--webhook', webhookId, '--wait', '--interval', '0.1']);
  assert.is(started.code, 0, started.output);
  const done = JSON.parse(started.stdout);
  assert.equal([done.state, done.rows, done.collections, done.webhook, done.collection], ['done', TASKS, ['tasks'], webhookId, null]);
  webhookBackfill = done.id;
  const lines = started.stderr.trimEnd().split('\n');
  assert.not.match(started.stderr, /\r|\x1b/, 'a log gets plain lines');
  assert.match(lines.at(-1)!, new RegExp(`^${done.id}  done  ${TASKS} rows of 1 collection in \\d+s$`));
  // Reading tasks, then perhaps one line once all is read and the reads go into the log.
  assert.equal(progressCounts(done, 'tasks', lines.slice(0, -1)).finishing ?? TASKS, TASKS);

  // The reads went to the webhook: one per task, nothing else from this backfill.
  const tasks = (await api('GET', `/api/syncs/${syncId}/tables`)).body.data.find((t: { name: string }) => t.name === 'tasks');
  assert.is(tasks.rows, TASKS);
  await waitFor('every read delivered', async () => (received.filter((e) => e.event === 'read').length >= TASKS ? true : undefined), 30_000);
  const reads = received.filter((e) => e.event === 'read');
  assert.is(reads.length, TASKS);
  assert.is(new Set(reads.map((e) => e.id)).size, TASKS, 'each task once');
  assert.ok(
    reads.every((e) => e.collection === 'tasks'),
    'tasks only',
  );
});

test('backfills start --wait on a larger collection shows the rows going up; list is a table', async () => {
  // Held at first: the progress shows it running at 0 rows, whatever the machine's speed.
  const lock = await holdTable('projects');
  const proc = spawnCli(['backfills', 'start', syncId, '--collection', 'projects', '--wait', '--interval', '0.1']);
  try {
    await waitFor('the first progress line', async () => (/running {2}projects \(1 of 1\) {2}0 rows\n/.test(proc.seen.stderr) ? true : undefined), 20_000);
  } finally {
    await lock.release();
  }
  const started = await proc.done();
  assert.is(started.code, 0, started.output);
  const done = JSON.parse(started.stdout);
  assert.equal([done.state, done.rows, done.webhook], ['done', PROJECTS, null]);
  const lines = started.stderr.trimEnd().split('\n');
  const { counts, finishing } = progressCounts(done, 'projects', lines.slice(0, -1));
  assert.is(counts[0], 0);
  if (finishing !== undefined) assert.is(finishing, PROJECTS, 'finishing: every row read');
  // A line is printed only when the figures change: each one further on.
  for (const [i, n] of counts.entries()) if (i > 0) assert.ok(n > counts[i - 1]!, `rows only go up, each line new: ${counts.join(', ')}`);
  assert.match(lines.at(-1)!, new RegExp(`^${done.id}  done  1,500 rows of 1 collection in \\d+s$`));

  const table = await cli(['backfills', 'list', syncId]);
  assert.is(table.code, 0, table.output);
  assert.match(table.stdout, /^ID +STATE +ROWS +READING +COLLECTIONS +TO +CREATED +FINISHED\n/);
  const rows = readTable(table.stdout);
  assert.equal(
    rows.map((r) => [r.ID, r.STATE, r.ROWS, r.READING, r.COLLECTIONS, r.TO]),
    [
      [done.id, 'done', '1,500', '-', 'projects', 'topics'],
      [webhookBackfill, 'done', String(TASKS), '-', 'tasks', webhookId],
    ],
  );
  for (const row of rows) assert.match(row.FINISHED!, /^(just now|\d+s ago)$/);
  const json = await cli(['backfills', 'list', syncId, '--json']);
  assert.equal(JSON.parse(json.stdout), (await api('GET', `/api/syncs/${syncId}/backfills`)).body);
  const shown = await cli(['backfills', 'show', syncId, done.id]);
  assert.equal(JSON.parse(shown.stdout), (await api('GET', `/api/syncs/${syncId}/backfills/${done.id}`)).body);
});

test('backfills cancel: a running one stops; a finished one is the API’s 409, exit 1', async () => {
  // Held: it cannot have finished by the time cancel runs.
  const lock = await holdTable('projects');
  let running: { id: string; state: string };
  try {
    const started = await cli(['backfills', 'start', syncId, '--collection', 'projects']);
    assert.is(started.code, 0, started.output);
    running = JSON.parse(started.stdout);
    assert.is(running.state, 'running');
    const canceled = await cli(['backfills', 'cancel', syncId, running.id]);
    assert.is(canceled.code, 0, canceled.output);
    const view = JSON.parse(canceled.stdout);
    assert.equal([view.state, view.rows], ['canceled', 0]);
  } finally {
    await lock.release();
  }
  // Released: it does not go on.
  await new Promise((resolve) => setTimeout(resolve, 1000));
  const later = JSON.parse((await cli(['backfills', 'show', syncId, running.id])).stdout);
  assert.equal([later.state, later.rows], ['canceled', 0]);

  for (const id of [running.id, webhookBackfill]) {
    const state = id === running.id ? 'canceled' : 'done';
    const refused = await cli(['backfills', 'cancel', syncId, id]);
    assert.is(refused.code, 1, refused.output);
    assert.is(refused.stdout, '');
    assert.is(refused.stderr, `tributary backfills cancel: 409 conflict: backfill ${id} is ${state} already; nothing to cancel\n`);
  }
});

test('backfills start refusals: an unknown collection names those there are, an unknown webhook is a 404', async () => {
  const unknown = await cli(['backfills', 'start', syncId, '--collection', 'taks', '--wait']);
  assert.is(unknown.code, 1);
  assert.is(unknown.stdout, '');
  assert.is(unknown.stderr, 'tributary backfills start: 400 invalid_request: collections: taks is not a collection of this sync (it has projects, tasks)\n');
  const noHook = await cli(['backfills', 'start', syncId, '--webhook', 'wh_nothere00000000']);
  assert.is(noHook.code, 1);
  assert.match(noHook.stderr, /^tributary backfills start: 404 not_found: webhook wh_nothere00000000/);
  const untaken = await cli(['backfills', 'start', syncId, '--webhook', webhookId, '--collection', 'projects']);
  assert.is(untaken.code, 1);
  assert.match(untaken.stderr, /400 invalid_request: collections: the webhook does not take projects/);
  const otherAccount = await createAccount(svc!, 'nosy-co');
  const foreign = await cli(['backfills', 'list', syncId], otherAccount.token);
  assert.is(foreign.code, 1);
  assert.match(foreign.stderr, new RegExp(`404 not_found: sync ${syncId} not found`));
});

test.run();
