import type Router from '@koa/router';
import type { IdlePools } from '../../db/idle-pools.ts';
import { waitForDecoder } from '../../decoder/wait.ts';
import { TributaryError } from '../../errors.ts';
import type { EventBus } from '../../events/bus.ts';
import type { PassSignals } from '../../sync/pass-signals.ts';
import { requestPass, waitForPass } from '../../sync/passes.ts';
import { validateQuery, wholeNumber } from '../body.ts';
import type { ApiOptions } from '../context.ts';
import type { ApiDocument } from '../openapi.ts';
import { CAPPED } from '../tenancy.ts';
import { z } from '../zod.ts';
import { SYNC_NOT_FOUND, findSync, syncParams } from './syncs.ts';

export interface WaitApiOptions {
  /** The process's started event bus: the decoder reports wait markers through it. Without it the wait endpoint answers 503. */
  bus?: EventBus;
  /** The process's started pass signals: completed passes wake waiters at once (else they poll every 100 ms), and shutdown ends waits. */
  passes?: PassSignals;
  /** Connections to the sync databases for the WAL markers, kept between waits. */
  markerPools?: IdlePools;
}

const DEFAULT_TIMEOUT_MS = 60_000;
const MAX_TIMEOUT_MS = 600_000;

const waitQuery = z.object({
  timeout: wholeNumber(0, MAX_TIMEOUT_MS, 'milliseconds')
    .optional()
    .describe(`How long to wait at most, in milliseconds (default ${DEFAULT_TIMEOUT_MS}); 0 answers the timeout at once`),
});

const waitAnswer = z
  .union([
    z.object({ ok: z.literal(true), lsn: z.string().describe('The WAL position the event log has reached') }).strict(),
    z
      .object({
        ok: z.literal(false),
        reason: z.literal('timeout'),
        waited_for: z
          .enum(['pass', 'decoder'])
          .optional()
          .describe(
            'What had not happened in time: a pass of the sync that started after the request (`pass`), or the decoder logging its changes (`decoder`)',
          ),
        detail: z.string().optional().describe('Why, where the service knows: the upstream limiting the sync, its last error'),
      })
      .strict(),
  ])
  .openapi('WaitResult');

/**
 * GET /api/wait/:id: answers once (1) a pass of the sync that started after
 * the request arrived has completed and then (2) the decoder has logged every change the
 * sync database had committed at that moment.
 */
export function waitRoutes(router: Router, api: ApiOptions & WaitApiOptions, doc: ApiDocument): void {
  doc.route({
    method: 'get',
    path: '/api/wait/:id',
    operationId: 'waitForSync',
    tag: 'wait',
    summary: 'Wait until a sync has caught up',
    description:
      'Answers once the database has been confirmed up to date with everything upstream had when the request arrived, and the events of those changes are in the event log; or, after `timeout`, that it timed out (also a 200).',
    access: 'token',
    params: syncParams,
    query: waitQuery,
    answers: { 200: { description: 'Caught up (`ok: true`), or timed out', schema: waitAnswer } },
    errors: { 404: SYNC_NOT_FOUND, 429: CAPPED.waits, 503: 'This process runs without the event bus, or the service is shutting down' },
  });
  router.get('/api/wait/:id', async (ctx) => {
    const principal = await api.authenticate(ctx, { capped: 'waits' });
    const timeoutMs = validateQuery(waitQuery, ctx).timeout ?? DEFAULT_TIMEOUT_MS;
    const sync = await findSync(api, principal, ctx.params.id!);
    const bus = api.bus;
    if (!bus) throw new TributaryError('unavailable', 'waiting is not available: this process runs without the event bus');
    ctx.set('Cache-Control', 'no-store');
    const timedOut = { ok: false, reason: 'timeout' } as const;
    // No pass that starts after the request can have completed in no time.
    if (timeoutMs === 0) {
      ctx.body = timedOut;
      return;
    }
    const began = Date.now();

    // Ends the wait when the client goes away or the service shuts down.
    const ended = new AbortController();
    const end = () => ended.abort();
    ctx.res.once('close', end);
    api.passes?.signal.addEventListener('abort', end, { once: true });

    let passed: boolean;
    try {
      const arrived = await requestPass(api.pool, sync.id);
      passed = await waitForPass({ control: api.pool, syncId: sync.id, arrived, timeoutMs, completions: api.passes, signal: ended.signal });
    } finally {
      api.passes?.signal.removeEventListener('abort', end);
    }
    if (api.passes?.signal.aborted) throw new TributaryError('unavailable', 'the service is shutting down');
    const left = timeoutMs - (Date.now() - began);
    if (!passed || left <= 0) {
      ctx.body = { ...timedOut, waited_for: 'pass', detail: await whyNoPass(api, sync.id, timeoutMs) } satisfies z.infer<typeof waitAnswer>;
      return;
    }
    // The pass's writes committed before it was confirmed; the marker goes into the WAL after them.
    const reached = await waitForDecoder({
      databaseUrl: await api.syncService.adminUrl(sync),
      bus,
      control: api.pool,
      timeoutMs: left,
      pools: api.markerPools,
    });
    ctx.body = reached
      ? { ok: true, lsn: reached.lsn }
      : ({ ...timedOut, waited_for: 'decoder', detail: 'the sync had caught up, but the decoder had not logged its changes in time' } satisfies z.infer<
          typeof waitAnswer
        >);
  });
}

/** What held the sync's pass up, as far as the control database knows: the upstream's limit, an error. */
async function whyNoPass(api: ApiOptions, syncId: string, timeoutMs: number): Promise<string> {
  const { rows } = await api.pool
    .query<{ slowed_by: string | null; slowed_recently: boolean; last_error: string | null; error_recent: boolean }>(
      `SELECT slowed_by, coalesce(slowed_at > now() - make_interval(secs => $2::float8 / 1000 + 60), false) AS slowed_recently,
              last_error, coalesce(last_error_at > now() - make_interval(secs => $2::float8 / 1000 + 60), false) AS error_recent
         FROM syncs WHERE id = $1`,
      [syncId, timeoutMs],
    )
    .catch(() => ({ rows: [] }));
  const row = rows[0];
  const parts = [`no pass of the sync that started after the request completed within ${timeoutMs} ms`];
  if (row?.slowed_recently && row.slowed_by) parts.push(`the upstream is limiting the sync: ${row.slowed_by}`);
  if (row?.error_recent && row.last_error) parts.push(`its last error: ${row.last_error}`);
  return parts.join('; ');
}
