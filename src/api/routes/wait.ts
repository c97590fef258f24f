import type Router from '@koa/router';
import type { Context } from 'koa';
import type { IdlePools } from '../../db/idle-pools.ts';
import { waitForDecoder } from '../../decoder/wait.ts';
import { TributaryError } from '../../errors.ts';
import type { EventBus } from '../../events/bus.ts';
import type { PassSignals } from '../../sync/pass-signals.ts';
import { requestPass, waitForPass } from '../../sync/passes.ts';
import type { ApiOptions } from '../context.ts';
import { findSync } from './syncs.ts';

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

function timeoutOf(ctx: Context): number {
  const raw = ctx.query.timeout;
  if (raw === undefined) return DEFAULT_TIMEOUT_MS;
  if (typeof raw !== 'string' || !/^\d{1,6}$/.test(raw) || Number(raw) > MAX_TIMEOUT_MS) {
    throw new TributaryError('invalid_request', `timeout: must be a whole number of milliseconds from 0 to ${MAX_TIMEOUT_MS}`);
  }
  return Number(raw);
}

/**
 * GET /api/wait/:id: answers once (1) a pass of the sync that started after
 * the request arrived has completed and then (2) the decoder has logged every change the
 * sync database had committed at that moment.
 */
export function waitRoutes(router: Router, api: ApiOptions & WaitApiOptions): void {
  router.get('/api/wait/:id', async (ctx) => {
    const principal = await api.authenticate(ctx);
    const timeoutMs = timeoutOf(ctx);
    const sync = await findSync(api, principal, ctx.params.id!);
    const bus = api.bus;
    if (!bus) throw new TributaryError('unavailable', 'waiting is not available: this process runs without the event bus');
    ctx.set('Cache-Control', 'no-store');
    const timedOut = { ok: false, reason: 'timeout' };
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
      ctx.body = timedOut;
      return;
    }
    // The pass's writes committed before it was confirmed; the marker goes into the WAL after them.
    const reached = await waitForDecoder({ databaseUrl: await api.syncService.adminUrl(sync), bus, control: api.pool, timeoutMs: left, pools: api.markerPools });
    ctx.body = reached ? { ok: true, lsn: reached.lsn } : timedOut;
  });
}
