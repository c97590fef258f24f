/**
 * A third kind of sync, defined outside the product: a notes service's account, one table of
 * notes, one event collection. It proves the seam: nothing outside this folder and the
 * registry it is put in knows it.
 */
import { z } from 'zod';
import { hashToken } from '../../../src/control/secrets.ts';
import { withClient } from '../../../src/db/sql.ts';
import { TributaryError } from '../../../src/errors.ts';
import type { RunnerContext, SourceKind } from '../../../src/kinds/kind.ts';
import type { Plan, PlanRequest, ProxyKindContext } from '../../../src/proxy/plan.ts';
import { upstreamPathOf } from '../../../src/proxy/routing.ts';
import { StatusReporter } from '../../../src/sync/status-reporter.ts';
import { pause } from '../../../src/time.ts';
import { createTableStatements, type TableShape } from '../../../src/writer/shape.ts';
import { deleteRows, upsertRows } from '../../../src/writer/upsert.ts';
import type { Note } from './upstream.ts';

export const NOTES_HOST = 'api.notes.test';
const NOTES: TableShape = {
  schema: 'public',
  name: 'notes',
  key: 'id',
  columns: [
    { name: 'id', type: 'text' },
    { name: 'text', type: 'text' },
    { name: 'updated_at', type: 'timestamptz' },
  ],
  comment: 'Notes',
};
const POLL_MS = 200;

async function call<T>(baseUrl: string, key: string, method: string, path: string): Promise<T> {
  const answer = await fetch(`${baseUrl}${path}`, { method, headers: { authorization: `Bearer ${key}` } });
  if (!answer.ok) throw new Error(`${method} ${path}: ${answer.status}`);
  return (await answer.json()) as T;
}

/** Lists every note each cycle; a cycle is a pass, so the wait endpoint is answered by it. */
function notesRunner(context: RunnerContext) {
  const stop = new AbortController();
  let running: Promise<void> | undefined;
  const status = new StatusReporter({
    control: context.control,
    target: context.target,
    schemas: context.schemas,
    syncId: context.sync.id,
    logger: context.logger,
  });
  const cycle = async () => {
    const started = new Date();
    await status.cycleStarted(started);
    const pass = await status.passStarted();
    const { data } = await call<{ data: Note[] }>(context.baseUrl, context.key.reveal(), 'GET', '/v1/notes');
    await upsertRows(context.target, NOTES, data);
    const listed = new Set(data.map((n) => n.id));
    const { rows } = await context.target.query<{ id: string }>('SELECT id FROM public.notes');
    await deleteRows(
      context.target,
      NOTES,
      rows.map((r) => r.id).filter((id) => !listed.has(id)),
    );
    await status.cycleCompleted(started, new Date(), pass);
  };
  const loop = async () => {
    while (!stop.signal.aborted) {
      const mark = context.passRequests?.requestMark(context.sync.id) ?? 0;
      await cycle().catch((error: Error) => status.failed(error.message, 'transient').catch(() => undefined));
      if (context.passRequests) await context.passRequests.requestedSince(context.sync.id, mark, POLL_MS, stop.signal);
      else await pause(POLL_MS, stop.signal);
    }
  };
  return {
    start: () => void (running = loop()),
    stop: async () => {
      stop.abort();
      await running;
    },
  };
}

/** A proxied POST or PATCH of a note: the answer is the note, written through to the key's syncs. */
function notesPlanner(context: ProxyKindContext) {
  return async ({ req, route }: PlanRequest): Promise<Plan> => {
    const plan: Plan = { path: upstreamPathOf(route) };
    const key = /^Bearer\s+(\S+)$/.exec(req.headers.authorization ?? '')?.[1];
    if (!key || (req.method !== 'POST' && req.method !== 'PATCH') || !route.path.startsWith('/v1/notes')) return plan;
    const digest = hashToken(key);
    plan.writeThrough = async (answer) => {
      const targets = await context.targets.where(`notes:${digest}`, "kind = 'notes' AND api_key_sha256 = $1", [digest]);
      for (const target of targets) await upsertRows(target.pool, NOTES, [answer as Note]);
      return { syncs: targets.length, written: targets.length, deleted: 0, fetched: false };
    };
    return plan;
  };
}

export const notesKind: SourceKind = {
  name: 'notes',
  upstreamHost: NOTES_HOST,
  createFields: { api_key: z.string().regex(/^nk_\w+$/, 'must be a notes key (nk_…)') },
  settings: { schema: z.object({ poll: z.boolean() }).strict(), defaults: { poll: true } },
  keyNamesAccount: true,
  describeUpstream: (sync) => `notes account ${sync.upstreamAccountId}`,
  events: { collectionOf: (table) => (table === 'notes' ? 'note' : undefined), keyOf: () => 'id' },
  describeTable: (table) => ({ upstreamName: table === 'notes' ? 'Notes' : null, upstreamId: null }),
  async check(input, context) {
    try {
      const me = await call<{ account: string }>(context.baseUrl, input.apiKey, 'GET', '/v1/me');
      return { upstreamAccountId: me.account, upstreamName: me.account };
    } catch {
      throw new TributaryError('unprocessable', 'the notes key was rejected');
    }
  },
  async prepareDatabase(adminUrl) {
    await withClient(adminUrl, async (client) => {
      for (const statement of createTableStatements(NOTES)) await client.query(statement);
    });
  },
  runner: notesRunner,
  proxy: { planner: notesPlanner },
};
