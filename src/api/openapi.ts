import { readFileSync } from 'node:fs';
import { OpenAPIRegistry, OpenApiGeneratorV31, type ResponseConfig, type RouteConfig } from '@asteasolutions/zod-to-openapi';
import type { AnyZodObject, ZodTypeAny } from 'zod';
import { errorAnswer } from './errors.ts';

/**
 * The management API's OpenAPI 3.1 document (`GET /api/openapi.json`). Each route file
 * describes its routes here, beside the handlers, with the very zod schemas the handlers
 * validate with and type their answers by; this class adds what follows from the route's
 * access, query and body (security, 400/401/403/413/415) so that no route has to repeat it.
 * test/api.openapi.test.ts holds every route the router registers against the document.
 */

type Method = 'get' | 'post' | 'patch' | 'delete';

/**
 * Who may call a route:
 * - `public`: anyone (health, this document, the console's files and sign-in);
 * - `token`: an account's token for its own things, or the operator's for everything;
 * - `admin`: the operator's token only;
 * - `session`: the console's session cookie alone (the console's session routes).
 */
export type Access = 'public' | 'token' | 'admin' | 'session';

export interface Answer {
  description: string;
  /** The body's schema; none for an answer without a body (304). */
  schema?: ZodTypeAny;
  /** `application/json` unless said otherwise. */
  contentType?: string | string[];
}

export interface Operation {
  method: Method;
  /** As the router has it: `/api/syncs/:id`, `/console/{*file}`. */
  path: string;
  operationId: string;
  tag: Tag;
  summary: string;
  description?: string;
  access: Access;
  params?: AnyZodObject;
  query?: AnyZodObject;
  /** A JSON body, read by readJson: its 400, 413 and 415 answers are added. */
  body?: { schema: ZodTypeAny; required?: boolean; description?: string };
  /** The success answers by status. */
  answers: Record<number, Answer>;
  /** When the route itself answers an error status, beyond what access, query and body imply. */
  errors?: Record<number, string>;
}

const TAGS = {
  accounts: 'Tenants: each account sees only its own syncs, databases, topics and webhooks (operator token)',
  syncs: 'Connections to an upstream, each with its own read-only PostgreSQL database',
  servers: 'The pool of PostgreSQL servers that hold the sync databases, by region (operator token)',
  webhooks: 'Event destinations of a sync, and their deliveries',
  backfills: "A sync's current rows replayed into its event stream as `read` events, on demand",
  wait: 'Read-after-write: wait until the database and the event log have caught up',
  service: 'Health, metrics and this document',
  'console (internal)': "The console's own routes: its page, files, sign-in and what it shows beyond the API proper. They may change with the console",
} as const;
export type Tag = keyof typeof TAGS;

const BEARER = 'bearer';
const SESSION = 'consoleSession';

const SECURITY_SCHEMES = {
  [BEARER]: {
    type: 'http',
    scheme: 'bearer',
    description: [
      '`Authorization: Bearer <token>`, with one of two kinds of token:',
      '- the **operator token** (`TRIBUTARY_ADMIN_TOKEN`, else generated on first start into `admin-token` in the data folder, which the log names): may do everything, and is the only one the operator routes take (accounts and their limits, the pool of servers, `/metrics`, a reader connection limit); it names the account with `account_id` where a route needs one;',
      "- an **account token** (`trb_…`, answered once by `POST /api/accounts`): sees only its own account's syncs, databases, topics and webhooks; another account's sync answers 404 exactly as a missing one.",
    ].join('\n'),
  },
  [SESSION]: {
    type: 'apiKey',
    in: 'cookie',
    name: 'tributary_session',
    description:
      "The console's session (`__Host-tributary_session` over https), set by `POST /console/session` for either kind of token and accepted wherever a bearer token is. Same-origin requests only; a request that changes something also sends the session's CSRF token in `X-CSRF-Token`. For the console; programs send a bearer token.",
  },
} as const;

/** The statuses every route of an access may answer, and why. */
const ACCESS_ERRORS: Record<Access, Record<number, string>> = {
  public: {},
  token: {
    401: 'No bearer token, a token that is not valid, or a console session that has ended',
    403: 'A console session used from another site, or for a change without its CSRF token',
    429: 'Too many failed credential checks from this address: see Retry-After',
  },
  admin: {
    401: 'No bearer token, a token that is not valid, or a console session that has ended',
    403: "An account's token: this needs the operator token (or a console session used from another site, or for a change without its CSRF token)",
    429: 'Too many failed credential checks from this address: see Retry-After',
  },
  session: {
    403: 'A request from another site',
  },
};

const INPUT_ERROR = 'Invalid input: the message names each offending field';

/** `/api/syncs/:id` → `/api/syncs/{id}`; a wildcard (`{*file}`) becomes a plain parameter. */
export const openApiPath = (route: string) => route.replace(/\{\*(\w+)\}/g, '{$1}').replace(/:(\w+)/g, '{$1}');

const { version } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };

export class ApiDocument {
  private readonly registry = new OpenAPIRegistry();

  route(op: Operation): void {
    const errors: Record<number, string[]> = {};
    const add = (status: number, why: string) => (errors[status] ??= []).push(why);
    for (const [status, why] of Object.entries(ACCESS_ERRORS[op.access])) add(Number(status), why);
    if (op.query || op.body) add(400, INPUT_ERROR);
    if (op.body) {
      add(400, 'The body is not JSON (`invalid_json`)');
      add(413, 'The body is larger than the limit');
      add(415, 'The body is not sent as JSON');
    }
    for (const [status, why] of Object.entries(op.errors ?? {})) add(Number(status), why);

    const responses: Record<number, ResponseConfig> = {};
    for (const [status, answer] of Object.entries(op.answers)) responses[Number(status)] = response(answer);
    for (const [status, whys] of Object.entries(errors)) {
      responses[Number(status)] = { description: whys.join('. Or: '), content: { 'application/json': { schema: errorAnswer } } };
    }

    const security: Array<Record<string, string[]>> =
      op.access === 'token' || op.access === 'admin' ? [{ [BEARER]: [] }, { [SESSION]: [] }] : op.access === 'session' ? [{ [SESSION]: [] }] : [];
    const route: RouteConfig = {
      method: op.method,
      path: openApiPath(op.path),
      operationId: op.operationId,
      tags: [op.tag],
      summary: op.summary,
      ...(op.description ? { description: op.description } : {}),
      security,
      request: {
        ...(op.params ? { params: op.params } : {}),
        ...(op.query ? { query: op.query } : {}),
        ...(op.body
          ? {
              body: {
                required: op.body.required ?? true,
                ...(op.body.description ? { description: op.body.description } : {}),
                content: { 'application/json': { schema: op.body.schema } },
              },
            }
          : {}),
      },
      responses,
    };
    this.registry.registerPath(route);
  }

  /** The document; generating it also checks that every path parameter is described. */
  build() {
    for (const [name, scheme] of Object.entries(SECURITY_SCHEMES)) this.registry.registerComponent('securitySchemes', name, scheme);
    return new OpenApiGeneratorV31(this.registry.definitions).generateDocument({
      openapi: '3.1.0',
      info: {
        title: 'Tributary',
        version,
        description: [
          'The management API of Tributary: accounts, syncs (each a read-only PostgreSQL database kept in step with an upstream), their settings and webhooks, and the wait endpoint.',
          'Errors are `{"error":{"code","message"}}`. Besides the answers listed per route, any route may answer 400 for a URL with a NUL byte, 405 (with `Allow`) for a method the path does not take, and 500 when something failed inside (the detail is in the service log).',
        ].join('\n\n'),
      },
      tags: Object.entries(TAGS).map(([name, description]) => ({ name, description })),
    });
  }
}

function response(answer: Answer): ResponseConfig {
  if (!answer.schema) return { description: answer.description };
  const types = [answer.contentType ?? 'application/json'].flat();
  return { description: answer.description, content: Object.fromEntries(types.map((type) => [type, { schema: answer.schema! }])) };
}

export type OpenApiDocument = ReturnType<ApiDocument['build']>;
