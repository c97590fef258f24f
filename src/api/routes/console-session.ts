import type Router from '@koa/router';
import type { Context } from 'koa';
import { z } from 'zod';
import { SESSION_MAX_MS, type ConsoleSessions, type SessionPrincipal } from '../../control/console-sessions.ts';
import { constantTimeEqual } from '../../control/secrets.ts';
import { TributaryError } from '../../errors.ts';
import { assertSameOrigin, CSRF_HEADER, servedSecurely, sessionCookieName } from '../auth.ts';
import { readJson, validate } from '../body.ts';
import type { ApiOptions } from '../context.ts';

const signIn = z.object({ token: z.string().trim().min(1, 'paste an API token').max(512, 'is too long to be a token') }).strict();

function principalView(principal: SessionPrincipal) {
  if (principal.kind === 'admin') return { kind: 'admin' as const };
  const { account } = principal;
  return { kind: 'account' as const, account: { id: account.id, name: account.name, events_username: account.eventsUsername } };
}

const sessionId = (ctx: Context) => ctx.cookies.get(sessionCookieName(true)) ?? ctx.cookies.get(sessionCookieName(false));

function setCookie(ctx: Context, value: string | null): void {
  const secure = servedSecurely(ctx);
  // Koa refuses a Secure cookie on what it takes for plain http; behind a proxy it is https.
  ctx.cookies.secure = secure;
  ctx.cookies.set(sessionCookieName(secure), value, {
    httpOnly: true,
    sameSite: 'strict',
    secure,
    path: '/',
    overwrite: true,
    ...(value === null ? { maxAge: 0 } : { maxAge: SESSION_MAX_MS }),
  });
}

/**
 * The console's sign-in: POST /console/session with an API token (an account's, or the
 * operator's) sets the session cookie; GET tells who is signed in and the CSRF token;
 * DELETE signs out (the session row goes, the cookie is cleared).
 */
export function consoleSessionRoutes(router: Router, api: ApiOptions, sessions: ConsoleSessions): void {
  router.post('/console/session', async (ctx) => {
    assertSameOrigin(ctx);
    const input = validate(signIn, await readJson(ctx, 4096));
    if (!api.authenticate.principalOf) throw new TributaryError('unavailable', 'console sign-in is not available on this server');
    const principal = await api.authenticate.principalOf(input.token).catch((error: unknown) => {
      if (error instanceof TributaryError && error.code === 'unauthorized') {
        throw new TributaryError('unauthorized', 'that token is not valid: use an account API token (trb_…) or the operator token');
      }
      throw error;
    });
    const created = await sessions.create(principal, api.authenticate.adminTokenSha256);
    setCookie(ctx, created.id);
    ctx.set('Cache-Control', 'no-store');
    api.logger.info({ who: principal.kind === 'admin' ? 'admin' : principal.account.id }, 'console sign-in');
    ctx.body = { principal: principalView(principal), csrf_token: created.csrfToken };
  });

  router.get('/console/session', async (ctx) => {
    assertSameOrigin(ctx);
    const id = sessionId(ctx);
    const session = id ? await sessions.find(id, api.authenticate.adminTokenSha256) : undefined;
    if (!session) throw new TributaryError('unauthorized', 'not signed in');
    ctx.set('Cache-Control', 'no-store');
    ctx.body = { principal: principalView(session.principal), csrf_token: session.csrfToken };
  });

  router.delete('/console/session', async (ctx) => {
    assertSameOrigin(ctx);
    const id = sessionId(ctx);
    if (id) {
      const session = await sessions.find(id, api.authenticate.adminTokenSha256);
      if (session && !constantTimeEqual(ctx.get(CSRF_HEADER), session.csrfToken)) {
        throw new TributaryError('forbidden', "send the console session's CSRF token in X-CSRF-Token");
      }
      await sessions.delete(id);
    }
    setCookie(ctx, null);
    ctx.body = { signed_out: true };
  });
}
