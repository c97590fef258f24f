import type Router from '@koa/router';
import { ReadLately, trimOldest } from '../../bounded-map.ts';
import type { Secret } from '../../control/secrets.ts';
import { TributaryError } from '../../errors.ts';
import { pingRunner, pingRunnerOnce } from '../../sync/passes.ts';
import { readBody } from '../body.ts';
import type { ApiOptions } from '../context.ts';
import type { ApiDocument } from '../openapi.ts';
import { z } from '../zod.ts';

/** A notification is a few hundred bytes (Airtable's ping names a base, a webhook and a time). */
const HOOK_BODY_LIMIT = 64 * 1024;
/** Hooks looked up lately, known or not: a flood of notifications costs no query each. */
const CACHE_MS = 60_000;
const CACHE_MAX = 10_000;
/** A notification that does not check out reads the sync's hook again if the cached one is older than this. */
const REREAD_MS = 5_000;
/**
 * Signed notifications seen lately (kinds that sign a time, which they refuse when older than
 * five minutes): the same one again is a replay. Kept in each API process, and in the control
 * database for a replay sent to another process (hook_replays).
 */
const REPLAY_WINDOW_MS = 10 * 60_000;
const REPLAY_MAX = 100_000;

type Hook = { kind: string; hookId: string; secret: Secret } | undefined;

const hookParams = z.object({
  kind: z.string().describe('The kind of sync, as the upstream was told (`airtable`)'),
  id: z.string().describe('The sync id'),
});

/**
 * POST /hooks/:kind/:id: where an upstream notifies a sync that something changed (Airtable's
 * webhook pings), given to it only when TRIBUTARY_PUBLIC_URL is set. It takes no token: the
 * kind checks the notification's signature with the sync's hook secret. One that checks out
 * wakes the sync's runner, which reads the changes through the API as always, so a notification
 * carries no data we trust and a replayed one costs one read at most.
 */
export function hookRoutes(router: Router, api: ApiOptions, doc: ApiDocument): void {
  const cache = new ReadLately<Hook>(CACHE_MAX);
  const seen = new Map<string, number>();
  /** True the first time a notification is seen within the window. */
  const firstTime = (key: string) => {
    const now = Date.now();
    const at = seen.get(key);
    if (at !== undefined && now - at < REPLAY_WINDOW_MS) return false;
    seen.delete(key);
    seen.set(key, now);
    trimOldest(seen, REPLAY_MAX);
    return true;
  };
  /** `fresherThanMs`: a cached entry older than this is read again (the sync may have a new hook). */
  // A sync without a hook yet may have one in a moment (its runner is making it).
  const lookup = (syncId: string, fresherThanMs = CACHE_MS) =>
    cache.get(
      syncId,
      (hook) => (hook ? fresherThanMs : REREAD_MS),
      () => controlDatabase(() => api.syncs.hook(syncId)),
    );

  doc.route({
    method: 'post',
    path: '/hooks/:kind/:id',
    operationId: 'notifySync',
    tag: 'syncs',
    summary: 'Notifications from the upstream (signed)',
    description:
      'Where the upstream says a sync has news (Airtable webhook pings, signed with the webhook’s secret; Stripe Connect webhook deliveries, signed with the endpoint’s secret). Registered by the sync itself when TRIBUTARY_PUBLIC_URL is set; not for clients.',
    access: 'public',
    params: hookParams,
    answers: { 200: { description: 'Signed by the sync’s hook: its runner reads the changes now', schema: z.object({ ok: z.literal(true) }).strict() } },
    errors: {
      401: 'The signature is missing, does not match, is too old, or was received already',
      404: 'No such sync of this kind, or it takes no notifications',
      413: 'The body is too large',
      503: 'The control database is unreachable',
    },
  });
  router.post('/hooks/:kind/:id', async (ctx) => {
    const { kind: kindName, id } = ctx.params as { kind: string; id: string };
    const kind = api.kinds.find(kindName);
    const known = kind?.inbound && /^syn_[a-z0-9]{1,64}$/.test(id);
    let hook = known ? await lookup(id) : undefined;
    if (!kind?.inbound || !hook || hook.kind !== kindName) throw new TributaryError('not_found', `no sync ${id} takes ${kindName} notifications`);
    // Unsigned or stale: refused before the body is read, and the connection closed rather than drained.
    if (!kind.inbound.signed(ctx.headers)) {
      ctx.set('Connection', 'close');
      throw new TributaryError('unauthorized', 'the notification is not signed by this sync’s hook');
    }
    const body = await readBody(ctx, HOOK_BODY_LIMIT);
    const signed = () => hook !== undefined && kind.inbound!.verify({ headers: ctx.headers, body, hookId: hook.hookId, secret: hook.secret });
    // A runner that made a new hook has a new secret: the cached one is read again, at most every few seconds.
    if (!signed() && !((hook = await lookup(id, REREAD_MS)) && signed())) {
      throw new TributaryError('unauthorized', 'the notification is not signed by this sync’s hook');
    }
    const delivery = { headers: ctx.headers, body, hookId: hook!.hookId, secret: hook!.secret };
    const replay = kind.inbound.replayKey?.(delivery);
    const part = kind.inbound.partOf?.(delivery);
    if (replay === undefined) {
      await controlDatabase(() => pingRunner(api.pool, id, part));
    } else {
      // This process's memory refuses a replay at no cost; the control database, one sent to another process.
      const key = `${id} ${replay}`;
      if (!firstTime(key) || !(await controlDatabase(() => pingRunnerOnce(api.pool, id, key, REPLAY_WINDOW_MS, part)))) {
        throw new TributaryError('unauthorized', 'this notification was received already');
      }
    }
    ctx.body = { ok: true };
  });
}

/** The control database down (a restart, say) is a 503: the sync's next timed read covers the lost ping. */
async function controlDatabase<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (cause) {
    throw new TributaryError('unavailable', 'the control database is unreachable; try again later', { cause, expose: true });
  }
}
