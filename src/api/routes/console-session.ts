import type Router from '@koa/router';
import type { Context } from 'koa';
import { SESSION_MAX_MS, type ConsoleSessions, type SessionPrincipal } from '../../control/console-sessions.ts';
import { constantTimeEqual } from '../../control/secrets.ts';
import { TributaryError } from '../../errors.ts';
import { assertSameOrigin, CSRF_HEADER, requestSource, servedSecurely, sessionCookie, sessionCookieName } from '../auth.ts';
import { readJson, validate } from '../body.ts';
import type { ApiOptions } from '../context.ts';
import type { ApiDocument } from '../openapi.ts';
import { z } from '../zod.ts';

const signIn = z
  .object({
    token: z.string().trim().min(1, 'paste an API token').max(512, 'is too long to be a token').describe("An account's API token or the operator token"),
  })
  .strict()
  .openapi('ConsoleSignIn');

const sessionAnswer = z
  .object({
    principal: z.discriminatedUnion('kind', [
      z.object({ kind: z.literal('admin') }).strict(),
      z.object({ kind: z.literal('account'), account: z.object({ id: z.string(), name: z.string(), events_username: z.string() }).strict() }).strict(),
    ]),
    csrf_token: z.string().describe('Send it in `X-CSRF-Token` with every request that changes something'),
  })
  .strict()
  .openapi('ConsoleSession');

function principalView(principal: SessionPrincipal): z.infer<typeof sessionAnswer>['principal'] {
  if (principal.kind === 'admin') return { kind: 'admin' };
  const { account } = principal;
  return { kind: 'account', account: { id: account.id, name: account.name, events_username: account.eventsUsername } };
}

const sessionId = sessionCookie;

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
export function consoleSessionRoutes(router: Router, api: ApiOptions, sessions: ConsoleSessions, doc: ApiDocument): void {
  const tag = 'console (internal)';
  doc.route({
    method: 'post',
    path: '/console/session',
    operationId: 'consoleSignIn',
    tag,
    summary: 'Sign the console in with a token',
    description: "Sets the session cookie (HttpOnly, SameSite=Strict) for the token's account, or for the operator.",
    access: 'public',
    body: { schema: signIn },
    answers: { 200: { description: 'Signed in: who, and the CSRF token', schema: sessionAnswer } },
    errors: {
      401: 'The token is not valid',
      403: 'A request from another site',
      429: 'Too many failed credential checks from this address: see Retry-After',
      503: 'Sign-in is not available on this server',
    },
  });
  router.post('/console/session', async (ctx) => {
    assertSameOrigin(ctx);
    const input = validate(signIn, await readJson(ctx, 4096));
    if (!api.authenticate.principalOf) throw new TributaryError('unavailable', 'console sign-in is not available on this server');
    const principal = await api.authenticate.principalOf(input.token, { via: 'console sign-in', source: requestSource(ctx) }).catch((error: unknown) => {
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

  doc.route({
    method: 'get',
    path: '/console/session',
    operationId: 'consoleSession',
    tag,
    summary: 'Who the console is signed in as',
    access: 'session',
    answers: { 200: { description: 'Who, and the CSRF token', schema: sessionAnswer } },
    errors: { 401: 'Not signed in, or the session has ended' },
  });
  router.get('/console/session', async (ctx) => {
    assertSameOrigin(ctx);
    const id = sessionId(ctx);
    const session = id ? await sessions.find(id, api.authenticate.adminTokenSha256) : undefined;
    if (!session) throw new TributaryError('unauthorized', 'not signed in');
    ctx.set('Cache-Control', 'no-store');
    ctx.body = { principal: principalView(session.principal), csrf_token: session.csrfToken };
  });

  doc.route({
    method: 'delete',
    path: '/console/session',
    operationId: 'consoleSignOut',
    tag,
    summary: 'Sign the console out',
    description: 'Ends the session and clears the cookie; signed out already is no error.',
    access: 'session',
    answers: { 200: { description: 'Signed out', schema: z.object({ signed_out: z.literal(true) }).strict() } },
    errors: { 403: "A session's request without its CSRF token" },
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
