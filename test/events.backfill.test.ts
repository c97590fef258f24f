/**
 * Backfills on demand: every current row becomes a `read` event, interleaved with live
 * changes so that a read never overtakes a newer change of its record. Writers change the
 * tables (updates, inserts, deletes, straight into the sync database) all through a backfill
 * read in small chunks; then the whole stream folds with every read equal to the record as
 * the events before it left it, and the stream folded from where the backfill began equals
 * the tables. A backfill for one webhook reaches that webhook alone.
 */
import pg from 'pg';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { readTables } from '../sim/check/canonical.ts';
import { compareFold, type DeliveredEvent, EventFold, foldEvents } from '../sim/check/events.ts';
import { RestTail } from '../sim/check/rest-events.ts';
import { waitFor } from './harness/process.ts';
import { TestReceiver } from './harness/receiver.ts';
import { createAccount, createAirtableSync, loudSetUp, request, startTestService, type TestAccount, type TestService } from './harness/service.ts';

let svc: TestService | undefined;
let account: TestAccount;
let syncId: string;
let readerUrl: string;
let admin: pg.Pool;
let tail: RestTail;
let receiver: TestReceiver;

/** What the receiver got on `path`, as events. */
const deliveredTo = (path: string): DeliveredEvent[] => receiver.on(path).map((r) => ({ key: r.id, value: r.body, where: `webhook ${path}` }));
const BASE = 'appBBBBBBBBBBBBBB';

test.before(
  loudSetUp(
    async () => {
      svc = await startTestService({
        config: { roles: ['api', 'sync', 'decoder', 'events'], webhookAllowPrivate: true },
        tunables: {
          airtable: { pollIntervalMs: 250, cycleGapMs: 250 },
          workerTickMs: 250,
          // Chunks of a few hundred rows: each read-and-emit transaction lasts long enough that
          // the writers' commits fall inside it (what share locks must keep out of it).
          backfills: { chunkRows: 150, lookGapMs: 50 },
        },
      });
      account = await createAccount(svc);
      svc.airtable.base(BASE).generate({
        seed: 7,
        tables: [
          { name: 'Projects', records: 300 },
          { name: 'Tasks', records: 200 },
        ],
      });
      const sync = await createAirtableSync(svc, account, BASE);
      syncId = sync.id;
      readerUrl = sync.readerUrl;
      admin = new pg.Pool({ connectionString: sync.adminUrl, max: 6 });
      receiver = await TestReceiver.start();
      tail = new RestTail(
        { restUrl: `http://127.0.0.1:${svc.service.eventsPort}`, username: account.eventsUsername, password: account.eventsPassword },
        `svc.${syncId}.`,
      );
    },
    () => svc,
  ),
);

test.after(async () => {
  await receiver?.close();
  await admin?.end();
  await svc?.stop();
});

/** Every event logged so far for the sync, once the log has caught up with the database. */
async function caughtUp(): Promise<void> {
  const answer = await request(svc!.api, 'GET', `/api/wait/${syncId}?timeout=60000`, { token: account.token });
  assert.is(answer.body?.ok, true, answer.text);
}

/**
 * The writers' changes undone: the sync's sweeps put back what the upstream holds (rows the
 * writers added go, deleted ones return). Settled once two looks a second apart find no new event.
 */
async function settled(): Promise<void> {
  let quiet = 0;
  while (quiet < 2) {
    await caughtUp();
    quiet = (await tail.next()).length === 0 ? quiet + 1 : 0;
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}

/**
 * The tables, and in `events` every event up to them. The sync's sweeps put back what the
 * writers changed page by page, at any moment after they stop, so tables read once after a
 * wait may already hold a put-back whose event the log read before them lacks. Read the
 * tables, then catch the log up: when that brings no new event, nothing committed between the
 * last two reads of the log, and the tables are what the events so far leave.
 */
async function tablesWithEvents(events: DeliveredEvent[]): Promise<Awaited<ReturnType<typeof readTables>>> {
  return waitFor(
    'the tables and the log read at one point',
    async () => {
      const tables = await readTables(readerUrl);
      await caughtUp();
      const more = await tail.next();
      events.push(...more);
      return more.length === 0 ? tables : undefined;
    },
    120_000,
  );
}

async function backfillDone(id: string): Promise<any> {
  return waitFor(
    `backfill ${id} done`,
    async () => {
      const view = await request(svc!.api, 'GET', `/api/syncs/${syncId}/backfills/${id}`, { token: account.token });
      assert.is(view.status, 200, view.text);
      assert.not.equal(view.body.state, 'failed', view.text);
      return view.body.state === 'done' ? view.body : undefined;
    },
    120_000,
  );
}

/**
 * Changes rows straight in the sync database until stopped: updates of a text column,
 * copies of a row under a new id, deletes. Each its own small transaction, two at a time.
 */
function startWriters(tables: string[]): { stop: () => Promise<number> } {
  let stopped = false;
  let changes = 0;
  let n = 0;
  const shapes = new Map<string, { names: string[]; text: string | undefined }>();
  const shapeOf = async (table: string) => {
    let shape = shapes.get(table);
    if (!shape) {
      const { rows } = await admin.query<{ name: string; type: string }>(
        `SELECT column_name AS name, data_type AS type FROM information_schema.columns WHERE table_schema = 'public' AND table_name = $1 ORDER BY ordinal_position`,
        [table],
      );
      shape = { names: rows.map((c) => `"${c.name}"`), text: rows.find((c) => c.type === 'text' && c.name !== 'id')?.name };
      shapes.set(table, shape);
    }
    return shape;
  };
  const one = async () => {
    while (!stopped) {
      const table = tables[n % tables.length]!;
      n++;
      const { names, text } = await shapeOf(table);
      const { rows } = await admin.query<{ id: string }>(`SELECT id FROM ${table} OFFSET floor(random() * 200) LIMIT 1`);
      const id = rows[0]?.id;
      if (!id) continue;
      const pick = n % 10;
      if (pick === 0) {
        await admin.query(`DELETE FROM ${table} WHERE id = $1`, [id]);
      } else if (pick === 1) {
        await admin.query(
          `INSERT INTO ${table} (${names.join(', ')}) SELECT $2, ${names.slice(1).join(', ')} FROM ${table} WHERE id = $1 ON CONFLICT DO NOTHING`,
          [id, `recZ${String(n).padStart(13, '0')}`],
        );
      } else if (text) {
        await admin.query(`UPDATE ${table} SET "${text}" = $2 WHERE id = $1`, [id, `edit ${n}`]);
      }
      changes++;
    }
  };
  const running = Promise.all([one(), one(), one()]);
  return {
    stop: async () => {
      stopped = true;
      await running;
      return changes;
    },
  };
}

const reads = (events: DeliveredEvent[]) => events.filter((e) => (JSON.parse(e.value) as { event: string }).event === 'read');

test('reads interleave with live changes: the whole stream folds, and from the backfill on it equals the tables', async () => {
  await caughtUp();
  const before = await tail.next();
  const full = new EventFold('rest').add(before);
  const tables = [...(await readTables(readerUrl)).keys()].filter((t) => !t.startsWith('_'));
  assert.ok(tables.length >= 2, tables.join(', '));

  const writers = startWriters(tables);
  await new Promise((resolve) => setTimeout(resolve, 300));
  const started = await request(svc!.api, 'POST', `/api/syncs/${syncId}/backfills`, { token: account.token });
  assert.is(started.status, 202, started.text);
  assert.is(started.body.state, 'running');
  assert.is(started.body.rows, 0);
  assert.equal([...started.body.collections].sort(), [...tables].sort());
  const done = await backfillDone(started.body.id);
  // Two more, back to back, for more chunks for the writers to meet.
  let rows = done.rows;
  for (let i = 0; i < 2; i++) {
    const again = await request(svc!.api, 'POST', `/api/syncs/${syncId}/backfills`, { token: account.token });
    rows += (await backfillDone(again.body.id)).rows;
  }
  const changes = await writers.stop();
  await caughtUp();
  const after = await tail.next();
  const database = await tablesWithEvents(after);

  // Every read equals the record as the events before it left it (EventFold's read check).
  full.add(after);
  assert.equal([...full.violations, ...compareFold('rest', full, database)], []);
  // From where the backfill began: a consumer with nothing before it gets the tables exactly.
  const fromBackfill = foldEvents('rest from the backfill', after, { midStream: true });
  assert.equal([...fromBackfill.violations, ...compareFold('rest', fromBackfill, database)], []);
  const readCount = reads(after).length;
  assert.is(rows, readCount, 'the backfills count every read they sent');
  assert.ok(readCount >= 1350, `${readCount} reads`);
  assert.ok(changes >= 20, `only ${changes} changes during the backfill`);
  assert.ok(after.length > readCount, 'live changes flowed meanwhile');
  assert.is(done.collection, null);
  assert.ok(done.finished_at);
});

test('a backfill for one webhook reaches it alone, and folds to its tables', async () => {
  {
    const port = new URL(receiver.origin).port;
    const hook = await request(svc!.api, 'POST', `/api/syncs/${syncId}/webhooks`, {
      token: account.token,
      body: { url: `http://127.0.0.1:${port}/hook`, topics: [`svc.${syncId}.tasks`] },
    });
    assert.is(hook.status, 201, hook.text);
    await caughtUp();
    await tail.next();

    // Bad input first: nothing is made.
    const unknown = await request(svc!.api, 'POST', `/api/syncs/${syncId}/backfills`, { token: account.token, body: { collections: ['nope'] } });
    assert.is(unknown.status, 400, unknown.text);
    assert.match(unknown.body.error.message, /nope is not a collection of this sync \(it has projects, tasks\)/);
    const untaken = await request(svc!.api, 'POST', `/api/syncs/${syncId}/backfills`, {
      token: account.token,
      body: { collections: ['projects'], webhook: hook.body.id },
    });
    assert.is(untaken.status, 400, untaken.text);
    assert.match(untaken.body.error.message, /the webhook does not take projects/);
    const noHook = await request(svc!.api, 'POST', `/api/syncs/${syncId}/backfills`, { token: account.token, body: { webhook: 'wh_nope' } });
    assert.is(noHook.status, 404, noHook.text);
    const extra = await request(svc!.api, 'POST', `/api/syncs/${syncId}/backfills`, { token: account.token, body: { tables: ['tasks'] } });
    assert.is(extra.status, 400, extra.text);
    const listed = await request(svc!.api, 'GET', `/api/syncs/${syncId}/backfills`, { token: account.token });
    assert.is(listed.body.data.length, 3, 'only the first test made any');

    const writers = startWriters(['tasks']);
    const started = await request(svc!.api, 'POST', `/api/syncs/${syncId}/backfills`, { token: account.token, body: { webhook: hook.body.id } });
    assert.is(started.status, 202, started.text);
    assert.equal(started.body.collections, ['tasks']);
    assert.is(started.body.webhook, hook.body.id);
    const done = await backfillDone(started.body.id);
    await writers.stop();
    await caughtUp();
    const rest = await tail.next();
    const tasks = (await tablesWithEvents(rest)).get('tasks')!;
    await waitFor('every read delivered', async () => (reads(deliveredTo('/hook')).length >= done.rows ? true : undefined), 30_000);
    await waitFor(
      'the webhook caught up',
      async () => {
        const fold = foldEvents('webhook', deliveredTo('/hook'), { midStream: true });
        return compareFold('webhook', fold, new Map([['tasks', tasks]])).length === 0 ? true : undefined;
      },
      30_000,
    ).catch(() => undefined);
    const fold = foldEvents('webhook', deliveredTo('/hook'), { midStream: true });
    assert.equal([...fold.violations, ...compareFold('webhook', fold, new Map([['tasks', tasks]]))], []);
    assert.is(reads(deliveredTo('/hook')).length, done.rows);
    // The topics got none of them: a REST consumer sees only the live changes.
    rest.push(...(await tail.next()));
    assert.is(reads(rest).length, 0, 'no read reached the topics');
    assert.ok(rest.length > 0, 'the live changes did');

    // Finished: nothing to cancel.
    const cancel = await request(svc!.api, 'DELETE', `/api/syncs/${syncId}/backfills/${started.body.id}`, { token: account.token });
    assert.is(cancel.status, 409, cancel.text);
  }
});

test('a webhook made with "backfill": true first gets the current rows of its topics', async () => {
  await settled();
  {
    const port = new URL(receiver.origin).port;
    const hook = await request(svc!.api, 'POST', `/api/syncs/${syncId}/webhooks`, {
      token: account.token,
      body: { url: `http://127.0.0.1:${port}/made`, topics: [`svc.${syncId}.projects`], backfill: true },
    });
    assert.is(hook.status, 201, hook.text);
    assert.is(hook.body.backfill.state, 'running');
    assert.is(hook.body.backfill.webhook, hook.body.id);
    assert.equal(hook.body.backfill.collections, ['projects']);
    const done = await backfillDone(hook.body.backfill.id);
    const projects = (await admin.query<{ n: number }>('SELECT count(*)::int AS n FROM projects')).rows[0]!.n;
    assert.is(done.rows, projects);
    await waitFor('every read delivered', async () => (reads(deliveredTo('/made')).length >= projects ? true : undefined), 30_000);
    const fold = foldEvents('webhook', deliveredTo('/made'), { midStream: true });
    assert.equal([...fold.violations, ...compareFold('webhook', fold, new Map([['projects', (await readTables(readerUrl)).get('projects')!]]))], []);

    // Asked of a topic with no table yet: a 409, and no webhook is made.
    const before = (await request(svc!.api, 'GET', `/api/syncs/${syncId}/webhooks`, { token: account.token })).body.data.length;
    const empty = await request(svc!.api, 'POST', `/api/syncs/${syncId}/webhooks`, {
      token: account.token,
      body: { url: `http://127.0.0.1:${port}/none`, topics: [`svc.${syncId}.nothing_yet`], backfill: true },
    });
    assert.is(empty.status, 409, empty.text);
    assert.is((await request(svc!.api, 'GET', `/api/syncs/${syncId}/webhooks`, { token: account.token })).body.data.length, before);
  }
});

test('a canceled backfill stops reading; one with a saved place goes on from it', async () => {
  await settled();
  // Cancel at once: it reads at most a chunk or two after.
  const started = await request(svc!.api, 'POST', `/api/syncs/${syncId}/backfills`, { token: account.token, body: { collections: ['projects'] } });
  assert.is(started.status, 202, started.text);
  const canceled = await request(svc!.api, 'DELETE', `/api/syncs/${syncId}/backfills/${started.body.id}`, { token: account.token });
  assert.is(canceled.status, 200, canceled.text);
  assert.is(canceled.body.state, 'canceled');
  await new Promise((resolve) => setTimeout(resolve, 1000));
  const later = await request(svc!.api, 'GET', `/api/syncs/${syncId}/backfills/${started.body.id}`, { token: account.token });
  assert.is(later.body.state, 'canceled');
  const projects = (await admin.query<{ n: number }>('SELECT count(*)::int AS n FROM projects')).rows[0]!.n;
  assert.ok(later.body.rows < projects, `${later.body.rows} of ${projects} rows read after the cancel`);

  // A backfill as a restart finds it: half of projects read already. It reads the rest only.
  await settled();
  const keys = (await admin.query<{ id: string }>('SELECT id FROM projects ORDER BY id')).rows.map((r) => r.id);
  const half = keys[Math.floor(keys.length / 2)]!;
  const control = new pg.Pool({ connectionString: svc!.controlUrl, max: 1 });
  try {
    await control.query(
      `INSERT INTO backfills (id, sync_id, account_id, collections, state, position, last_key)
       SELECT 'bf_resumedresumed01', id, account_id, ARRAY['projects', 'tasks'], 'running', 0, $2 FROM syncs WHERE id = $1`,
      [syncId, half],
    );
    await control.query(`SELECT pg_notify('tributary_events', $1)`, [syncId]);
  } finally {
    await control.end();
  }
  const done = await backfillDone('bf_resumedresumed01');
  await caughtUp();
  const read = reads(await tail.next()).map((e) => JSON.parse(e.value) as { id: string; table_db_name: string });
  const tasks = (await admin.query<{ n: number }>('SELECT count(*)::int AS n FROM tasks')).rows[0]!.n;
  const projectReads = read.filter((e) => e.table_db_name === 'projects');
  // Only the records after the saved place, in the table's key order.
  assert.equal(
    projectReads.map((e) => e.id),
    keys.slice(keys.indexOf(half) + 1),
  );
  const taskReads = read.filter((e) => e.table_db_name === 'tasks');
  assert.is(taskReads.length, tasks);
  assert.is(done.rows, read.length);
});

/** The top-level keys of a JSON object's text, in order, repeats kept (JSON.parse keeps only the last). */
function topLevelKeys(line: string): string[] {
  const keys: string[] = [];
  let depth = 0;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (c === '"') {
      let j = i + 1;
      while (line[j] !== '"') j += line[j] === '\\' ? 2 : 1;
      if (depth === 1 && line[j + 1] === ':') keys.push(line.slice(i + 1, j));
      i = j;
    } else if (c === '{' || c === '[') depth++;
    else if (c === '}' || c === ']') depth--;
  }
  return keys;
}

test('every log line of the backfills and webhooks names each field once', () => {
  const lines = svc!.logs.lines.filter((line) => /"part":"(backfills|webhooks)"/.test(line));
  assert.ok(lines.length > 0, 'the backfills and webhooks logged something');
  const repeated = lines.filter((line) => {
    const keys = topLevelKeys(line);
    return new Set(keys).size !== keys.length;
  });
  assert.equal(repeated.slice(0, 3), []);
});

test.run();
