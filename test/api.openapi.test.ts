/**
 * The OpenAPI document of the management API (`GET /api/openapi.json`) against the running
 * service: every route the router registers is documented (with its path parameters, its
 * request, a success answer and its error answers), the claims the document makes about
 * authentication and bodies hold for every route, and real answers, successes and errors,
 * match the schemas documented for them (compiled from the served document with Ajv).
 */
import { readFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import Router from '@koa/router';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { openApiPath } from '../src/api/openapi.ts';
import { freePort } from './harness/ports.ts';
import { repoRoot, waitFor } from './harness/process.ts';
import { startSecondServer } from './harness/second-server.ts';
import {
  airtableSyncBody,
  AIRTABLE_TEST_TOKEN,
  createAccount,
  loudSetUp,
  request,
  startTestService,
  stripeSyncBody,
  waitOk,
  type HttpAnswer,
  type TestAccount,
  type TestService,
} from './harness/service.ts';

type Schema = Record<string, unknown>;
interface OperationDoc {
  operationId?: string;
  summary?: string;
  security?: Array<Record<string, string[]>>;
  parameters?: Array<{ name: string; in: string; required?: boolean; schema?: Schema }>;
  requestBody?: { content: Record<string, { schema?: Schema }> };
  responses: Record<string, { content?: Record<string, { schema?: Schema }> }>;
}
interface Document {
  openapi: string;
  info: { title: string; version: string };
  paths: Record<string, Record<string, OperationDoc>>;
  components: { schemas: Record<string, Schema>; securitySchemes: Record<string, Schema & { description?: string }> };
}

let svc: TestService;
let doc: Document;
let account: TestAccount;
let syncId: string;
let stripeSyncId: string;
let webhookId: string;
let base: ReturnType<TestService['airtable']['createBase']>;
let receiver: http.Server;
let receiverUrl: string;

const ERROR_REF = '#/components/schemas/Error';
const METHODS = ['get', 'post', 'patch', 'put', 'delete'] as const;

test.before(
  loudSetUp(
    async () => {
      // A receiver that always fails, so deliveries exist (exhausted after one attempt).
      receiver = http.createServer((_req, res) => res.writeHead(500).end('no'));
      await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
      receiverUrl = `http://127.0.0.1:${(receiver.address() as { port: number }).port}/hook`;
      svc = await startTestService({
        config: { roles: ['api', 'sync', 'decoder'], webhookAllowPrivate: true },
        tunables: {
          airtable: { pollIntervalMs: 250, cycleGapMs: 250 },
          stripe: { pollIntervalMs: 250 },
          workerTickMs: 250,
          webhooks: { schedule: { maxAttempts: 1, timeoutMs: 2_000 } },
        },
      });
      doc = (await request(svc.api, 'GET', '/api/openapi.json')).body;
      account = await createAccount(svc, 'acme');
      base = svc.airtable.createBase({ name: 'Projects' });
      base.createTable('Tasks', [{ name: 'Name', type: 'singleLineText' }]);
      base.createRecords('Tasks', [{ Name: 'a' }, { Name: 'b' }]);
      const created = await request(svc.api, 'POST', '/api/syncs', {
        token: account.token,
        body: { kind: 'airtable', base_id: base.id, api_key: AIRTABLE_TEST_TOKEN },
      });
      assert.is(created.status, 201, created.text);
      syncId = created.body.id;
      await waitOk(svc, account.token, syncId, 60_000);
      const webhook = await request(svc.api, 'POST', `/api/syncs/${syncId}/webhooks`, {
        token: account.token,
        body: { url: receiverUrl, topics: [`svc.${syncId}.tasks`] },
      });
      assert.is(webhook.status, 201, webhook.text);
      webhookId = webhook.body.id;
    },
    () => svc,
  ),
);

test.after(async () => {
  await svc?.stop();
  receiver?.close();
});

// ── the document's own checks ──

/** The operation documented for a route template (`/api/syncs/{id}`) and method. */
function operation(method: string, template: string): OperationDoc {
  const op = doc.paths[template]?.[method.toLowerCase()];
  if (!op) throw new Error(`${method} ${template} is not in the document`);
  return op;
}

const mediaType = (type: string | null) => (type ?? '').split(';')[0]!.trim().toLowerCase();

const ajv = new Ajv2020({ allErrors: true, strict: false });
ajv.addFormat('date-time', (text: string) => /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/.test(text) && !Number.isNaN(Date.parse(text)));

/** The schema the document gives an answer of this status, in this content type. */
function answerSchema(op: OperationDoc, status: number, contentType: string | null, where: string): Schema {
  const response = op.responses[String(status)];
  if (!response) throw new Error(`${where}: the document has no ${status} answer (it has ${Object.keys(op.responses).join(', ')})`);
  const entry = Object.entries(response.content ?? {}).find(([type]) => mediaType(type) === mediaType(contentType));
  if (!entry?.[1].schema)
    throw new Error(
      `${where}: the ${status} answer is documented without ${mediaType(contentType)} (it has ${Object.keys(response.content ?? {}).join(', ') || 'no body'})`,
    );
  return entry[1].schema;
}

const checked = new Set<string>();

/**
 * Holds a real answer to the schema the served document gives it. The schema is compiled with
 * the document's components, so its `$ref`s resolve as a client's would.
 */
function conforms(answer: HttpAnswer, method: string, template: string): void {
  const where = `${method} ${template} → ${answer.status}`;
  const schema = answerSchema(operation(method, template), answer.status, answer.headers.get('content-type'), where);
  const validate = ajv.compile({ ...schema, components: doc.components });
  const body = mediaType(answer.headers.get('content-type')) === 'application/json' ? answer.body : answer.text;
  if (!validate(body)) {
    const errors = validate.errors!.map((e) => `${e.instancePath || '/'} ${e.message} ${JSON.stringify(e.params)}`);
    assert.unreachable(`${where} does not match its documented schema: ${errors.join('; ')}\n${answer.text.slice(0, 600)}`);
  }
  checked.add(`${method.toUpperCase()} ${template} ${answer.status}`);
}

interface RouteLayer {
  path: string | RegExp;
  methods: string[];
  paramNames: Array<{ name: string | number }>;
}

/** Every method and path the router answers (HEAD goes with GET). */
function routesOf(layers: RouteLayer[]) {
  return layers.flatMap((layer) =>
    layer.methods
      .filter((method) => method !== 'HEAD' || !layer.methods.includes('GET'))
      .map((method) => ({ method: method.toLowerCase(), route: String(layer.path), params: layer.paramNames.map((key) => String(key.name)) })),
  );
}

/** What the document lacks for these routes: a missing route, parameters, request or answers. */
function problemsOf(document: Document, layers: RouteLayer[]): string[] {
  const problems: string[] = [];
  for (const { method, route, params } of routesOf(layers)) {
    const name = `${method.toUpperCase()} ${route}`;
    const op = document.paths[openApiPath(route)]?.[method];
    if (!op) {
      problems.push(`${name} is not in the document`);
      continue;
    }
    if (!op.operationId || !op.summary) problems.push(`${name} has no operationId or summary`);
    if (!Array.isArray(op.security)) problems.push(`${name} does not say what authentication it takes`);
    const pathParams = (op.parameters ?? []).filter((p) => p.in === 'path');
    if (JSON.stringify(pathParams.map((p) => p.name).sort()) !== JSON.stringify([...params].sort())) {
      problems.push(`${name} documents path parameters ${pathParams.map((p) => p.name).join(', ') || 'none'}, the router has ${params.join(', ') || 'none'}`);
    }
    for (const p of op.parameters ?? []) if (!p.schema) problems.push(`${name}: parameter ${p.name} has no schema`);
    const body = op.requestBody?.content['application/json']?.schema;
    if (op.requestBody && !body) problems.push(`${name} documents a body without a JSON schema`);

    const statuses = Object.keys(op.responses).map(Number);
    const success = statuses.filter((s) => s >= 200 && s < 300);
    // A route that answers with a redirect (a stable attachment link) has no body to describe.
    const redirects = statuses.some((s) => s >= 300 && s < 400 && s !== 304) && success.length === 0;
    if (!redirects && !success.some((s) => Object.values(op.responses[s]!.content ?? {}).some((c) => c.schema))) {
      problems.push(`${name} has no success answer with a schema`);
    }
    for (const status of statuses.filter((s) => s >= 400)) {
      const refs = Object.values(op.responses[status]!.content ?? {}).map((c) => c.schema?.$ref);
      if (refs.length === 0 || refs.some((ref) => ref !== ERROR_REF)) problems.push(`${name}: its ${status} answer is not the shared Error`);
    }
    const needs = (status: number, why: string) => statuses.includes(status) || problems.push(`${name} ${why} but documents no ${status}`);
    if (op.security?.some((s) => 'bearer' in s)) {
      needs(401, 'takes a token');
      needs(403, 'takes a token (or a console session)');
    }
    if (op.requestBody) {
      needs(400, 'reads a body');
      needs(413, 'reads a body');
      needs(415, 'reads a body');
    }
    if ((op.parameters ?? []).some((p) => p.in === 'query')) needs(400, 'takes query parameters');
    if (params.length > 0) needs(404, 'names something in its path');
  }
  return problems;
}

/** A route's path with real ids of this test's account, sync, webhook and a console file. */
function filled(route: string): string {
  return route
    .replace(':wid', webhookId)
    .replace(':id', route.startsWith('/api/accounts/') ? account.id : syncId)
    .replace('{*file}', 'app.js');
}

const layers = () => svc.service.apiRouter!.stack as unknown as RouteLayer[];

test('the document is served without a token: OpenAPI 3.1, Tributary at the package version, the bearer scheme', async () => {
  const answer = await request(svc.api, 'GET', '/api/openapi.json');
  assert.is(answer.status, 200);
  assert.is(mediaType(answer.headers.get('content-type')), 'application/json');
  assert.is(answer.body.openapi, '3.1.0');
  assert.is(answer.body.info.title, 'Tributary');
  const pkg = JSON.parse(readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as { version: string };
  assert.is(answer.body.info.version, pkg.version);
  const bearer = answer.body.components.securitySchemes.bearer;
  assert.equal({ type: bearer.type, scheme: bearer.scheme }, { type: 'http', scheme: 'bearer' });
  assert.match(bearer.description, /operator token/);
  assert.match(bearer.description, /account token/);
  assert.ok(answer.body.components.schemas.Error, 'the shared error schema');
  conforms(answer, 'get', '/api/openapi.json');
});

test('the document is served as built once: the same bytes each time, and a 304 to a client that has them', async () => {
  const first = await fetch(`${svc.api}/api/openapi.json`);
  const bytes = await first.text();
  const etag = first.headers.get('etag');
  assert.ok(etag, 'an ETag');
  const again = await fetch(`${svc.api}/api/openapi.json`);
  assert.is(await again.text(), bytes);
  assert.is(again.headers.get('etag'), etag);
  const cached = await fetch(`${svc.api}/api/openapi.json`, { headers: { 'if-none-match': etag! } });
  assert.is(cached.status, 304);
  assert.is(await cached.text(), '');
  const stale = await fetch(`${svc.api}/api/openapi.json`, { headers: { 'if-none-match': '"other"' } });
  assert.is(stale.status, 200);
  assert.is(await stale.text(), bytes);
});

test('every route the router registers is documented with its parameters, request, success and error answers', () => {
  const routes = routesOf(layers());
  assert.ok(routes.length >= 25, `the router has ${routes.length} routes`);
  assert.equal(problemsOf(doc, layers()), []);
  // And the document names no route the router does not have.
  const registered = new Set(routes.map((r) => `${r.method} ${openApiPath(r.route)}`));
  const documented = Object.entries(doc.paths).flatMap(([p, ops]) =>
    Object.keys(ops)
      .filter((m) => (METHODS as readonly string[]).includes(m))
      .map((m) => `${m} ${p}`),
  );
  assert.equal(
    documented.filter((d) => !registered.has(d)),
    [],
  );
  assert.is(documented.length, routes.length);
});

test('a route the document lacks is reported, and so are parameters it gets wrong', () => {
  const extra = new Router();
  extra.get('/api/undocumented', (ctx) => void (ctx.body = {}));
  extra.delete('/api/syncs/:id/webhooks/:hook', (ctx) => void (ctx.body = {}));
  const problems = problemsOf(doc, [...layers(), ...(extra.stack as unknown as RouteLayer[])]);
  assert.equal(problems, ['GET /api/undocumented is not in the document', 'DELETE /api/syncs/:id/webhooks/:hook is not in the document']);
  const renamed = structuredClone(doc);
  const webhook = renamed.paths['/api/syncs/{id}/webhooks/{wid}']!.get!;
  webhook.parameters = webhook.parameters!.filter((p) => p.name !== 'wid');
  delete renamed.paths['/api/syncs/{id}']!.patch!.responses['415'];
  assert.equal(problemsOf(renamed, layers()), [
    'PATCH /api/syncs/:id reads a body but documents no 415',
    'GET /api/syncs/:id/webhooks/:wid documents path parameters id, the router has id, wid',
  ]);
});

test('every route documented as taking a token answers 401 without one, in the documented shape', async () => {
  let probed = 0;
  for (const { method, route } of routesOf(layers())) {
    const op = operation(method, openApiPath(route));
    if (!op.security?.some((s) => 'bearer' in s)) continue;
    const answer = await request(svc.api, method.toUpperCase(), filled(route));
    assert.is(answer.status, 401, `${method} ${route}: ${answer.text}`);
    assert.is(answer.headers.get('www-authenticate'), 'Bearer');
    conforms(answer, method, openApiPath(route));
    probed++;
  }
  assert.ok(probed >= 20, `${probed} routes take a token`);
});

test('routes documented as public answer without a token', async () => {
  const publicRoutes = routesOf(layers()).filter(({ method, route }) => operation(method, openApiPath(route)).security?.length === 0);
  assert.ok(publicRoutes.length >= 5);
  for (const { method, route } of publicRoutes) {
    const answer = await request(svc.api, method.toUpperCase(), filled(route));
    assert.ok(answer.status !== 401 && answer.status !== 403, `${method} ${route}: ${answer.status} ${answer.text.slice(0, 200)}`);
  }
});

test('a route reads a JSON body exactly when the document says it takes one', async () => {
  const headers = { 'content-type': 'application/json' };
  for (const { method, route } of routesOf(layers()).filter((r) => r.method === 'post' || r.method === 'patch')) {
    const op = operation(method, openApiPath(route));
    const answer = await request(svc.api, method.toUpperCase(), filled(route), { token: svc.adminToken, raw: '{', headers });
    const readsBody = answer.status === 400 && answer.body?.error?.code === 'invalid_json';
    assert.is(readsBody, op.requestBody !== undefined, `${method} ${route}: ${answer.status} ${answer.text.slice(0, 200)}`);
    if (readsBody) conforms(answer, method, openApiPath(route));
  }
});

// ── real traffic against the documented answers ──

test('accounts: created, listed, limited; refused with an account token', async () => {
  const created = await request(svc.api, 'POST', '/api/accounts', { token: svc.adminToken, body: { name: 'bravo' } });
  assert.is(created.status, 201);
  conforms(created, 'post', '/api/accounts');
  conforms(await request(svc.api, 'GET', '/api/accounts', { token: svc.adminToken }), 'get', '/api/accounts');
  const limited = await request(svc.api, 'PATCH', `/api/accounts/${created.body.id}`, { token: svc.adminToken, body: { max_syncs: 3 } });
  assert.is(limited.status, 200);
  conforms(limited, 'patch', '/api/accounts/{id}');
  const forbidden = await request(svc.api, 'POST', '/api/accounts', { token: account.token, body: { name: 'x' } });
  assert.is(forbidden.status, 403);
  conforms(forbidden, 'post', '/api/accounts');
  const missing = await request(svc.api, 'PATCH', '/api/accounts/acc_nope', { token: svc.adminToken, body: { max_syncs: 3 } });
  assert.is(missing.status, 404);
  conforms(missing, 'patch', '/api/accounts/{id}');
  const bad = await request(svc.api, 'PATCH', `/api/accounts/${created.body.id}`, { token: svc.adminToken, body: {} });
  assert.is(bad.status, 400);
  conforms(bad, 'patch', '/api/accounts/{id}');
});

test('servers: added, listed, shown, changed, refused, removed', async () => {
  const second = await startSecondServer();
  try {
    const added = await request(svc.api, 'POST', '/api/servers', { token: svc.adminToken, body: { url: second.adminUrl, region: 'eu', capacity: 2 } });
    assert.is(added.status, 201, added.text);
    conforms(added, 'post', '/api/servers');
    const twice = await request(svc.api, 'POST', '/api/servers', { token: svc.adminToken, body: { url: second.adminUrl, region: 'eu', capacity: 2 } });
    assert.is(twice.status, 409);
    conforms(twice, 'post', '/api/servers');
    const closed = `postgres://postgres:x@127.0.0.1:${await freePort()}/postgres`;
    const unreachable = await request(svc.api, 'POST', '/api/servers', { token: svc.adminToken, body: { url: closed, region: 'eu', capacity: 2 } });
    assert.is(unreachable.status, 422);
    conforms(unreachable, 'post', '/api/servers');
    const notAdmin = await request(svc.api, 'POST', '/api/servers', { token: account.token, body: { url: closed, region: 'eu', capacity: 2 } });
    assert.is(notAdmin.status, 403);
    conforms(notAdmin, 'post', '/api/servers');
    const listed = await request(svc.api, 'GET', '/api/servers', { token: svc.adminToken });
    assert.is(listed.body.data.length, 2);
    conforms(listed, 'get', '/api/servers');
    conforms(await request(svc.api, 'GET', `/api/servers/${added.body.id}`, { token: svc.adminToken }), 'get', '/api/servers/{id}');
    conforms(await request(svc.api, 'GET', '/api/servers/srv_nope', { token: svc.adminToken }), 'get', '/api/servers/{id}');
    const drained = await request(svc.api, 'PATCH', `/api/servers/${added.body.id}`, { token: svc.adminToken, body: { draining: true, capacity: 1 } });
    assert.is(drained.status, 200, drained.text);
    conforms(drained, 'patch', '/api/servers/{id}');
    const tooMany = await request(svc.api, 'PATCH', `/api/servers/${added.body.id}`, { token: svc.adminToken, body: { capacity: 5000 } });
    assert.is(tooMany.status, 422);
    conforms(tooMany, 'patch', '/api/servers/{id}');
    const busy = await request(svc.api, 'DELETE', `/api/servers/${listed.body.data[0].id}`, { token: svc.adminToken });
    assert.is(busy.status, 409, busy.text);
    conforms(busy, 'delete', '/api/servers/{id}');
    const removed = await request(svc.api, 'DELETE', `/api/servers/${added.body.id}`, { token: svc.adminToken });
    assert.is(removed.status, 200, removed.text);
    conforms(removed, 'delete', '/api/servers/{id}');
  } finally {
    await second.stop();
  }
});

test('syncs of both kinds: created, listed, shown, changed, refused, deleted', async () => {
  const stripe = await request(svc.api, 'POST', '/api/syncs', { token: account.token, body: { ...stripeSyncBody(), settings: { turbo: true } } });
  assert.is(stripe.status, 201, stripe.text);
  conforms(stripe, 'post', '/api/syncs');
  stripeSyncId = stripe.body.id;
  const other = await request(svc.api, 'POST', '/api/syncs', { token: account.token, body: airtableSyncBody('appBBBBBBBBBBBBBB') });
  assert.is(other.status, 201, other.text);
  conforms(other, 'post', '/api/syncs');

  const listed = await request(svc.api, 'GET', '/api/syncs', { token: account.token });
  assert.is(listed.body.data.length, 3);
  conforms(listed, 'get', '/api/syncs');
  // The synced one has a completed cycle: its status has times, not nulls.
  const shown = await request(svc.api, 'GET', `/api/syncs/${syncId}`, { token: account.token });
  assert.ok(shown.body.status.completed_at);
  conforms(shown, 'get', '/api/syncs/{id}');
  conforms(await request(svc.api, 'GET', `/api/syncs?account_id=${account.id}`, { token: svc.adminToken }), 'get', '/api/syncs');

  const patched = await request(svc.api, 'PATCH', `/api/syncs/${syncId}`, { token: account.token, body: { settings: { debounce_ms: 10 } } });
  assert.is(patched.status, 200, patched.text);
  conforms(patched, 'patch', '/api/syncs/{id}');
  const limit = await request(svc.api, 'PATCH', `/api/syncs/${stripeSyncId}`, { token: svc.adminToken, body: { reader_connection_limit: 2 } });
  assert.is(limit.status, 200, limit.text);
  conforms(limit, 'patch', '/api/syncs/{id}');
  const notAdmin = await request(svc.api, 'PATCH', `/api/syncs/${stripeSyncId}`, { token: account.token, body: { reader_connection_limit: 2 } });
  assert.is(notAdmin.status, 403);
  conforms(notAdmin, 'patch', '/api/syncs/{id}');
  const wrongKind = await request(svc.api, 'PATCH', `/api/syncs/${stripeSyncId}`, { token: account.token, body: { settings: { lookup_as: 'text' } } });
  assert.is(wrongKind.status, 400);
  assert.match(wrongKind.body.error.message, /lookup_as/);
  conforms(wrongKind, 'patch', '/api/syncs/{id}');

  const badKind = await request(svc.api, 'POST', '/api/syncs', { token: account.token, body: { kind: 'dropbox', api_key: 'x' } });
  assert.is(badKind.status, 400);
  assert.match(badKind.body.error.message, /^kind: must be one of /);
  conforms(badKind, 'post', '/api/syncs');
  const notJson = await request(svc.api, 'POST', '/api/syncs', { token: account.token, raw: 'kind=airtable', headers: { 'content-type': 'text/plain' } });
  assert.is(notJson.status, 415);
  conforms(notJson, 'post', '/api/syncs');
  const twice = await request(svc.api, 'POST', '/api/syncs', { token: account.token, body: airtableSyncBody('appBBBBBBBBBBBBBB') });
  assert.is(twice.status, 409);
  conforms(twice, 'post', '/api/syncs');
  const badKey = await request(svc.api, 'POST', '/api/syncs', {
    token: account.token,
    body: { ...airtableSyncBody('appCCCCCCCCCCCCCC'), api_key: 'patWRONG' },
  });
  assert.is(badKey.status, 422, badKey.text);
  conforms(badKey, 'post', '/api/syncs');
  const foreign = await request(svc.api, 'GET', '/api/syncs?account_id=acc_other', { token: account.token });
  assert.is(foreign.status, 403);
  conforms(foreign, 'get', '/api/syncs');
  const missing = await request(svc.api, 'GET', '/api/syncs/syn_doesnotexist000', { token: account.token });
  assert.is(missing.status, 404);
  conforms(missing, 'get', '/api/syncs/{id}');

  const badFlag = await request(svc.api, 'DELETE', `/api/syncs/${other.body.id}?keep_database=maybe`, { token: account.token });
  assert.is(badFlag.status, 400);
  assert.is(badFlag.body.error.message, 'keep_database: must be true or false');
  conforms(badFlag, 'delete', '/api/syncs/{id}');
  const deleted = await request(svc.api, 'DELETE', `/api/syncs/${other.body.id}?keep_database=false`, { token: account.token });
  assert.is(deleted.status, 200, deleted.text);
  conforms(deleted, 'delete', '/api/syncs/{id}');
});

test('webhooks and their deliveries', async () => {
  // Two changes after the webhook exists; the receiver refuses them, so they are exhausted.
  base.createRecords('Tasks', [{ Name: 'c' }, { Name: 'd' }]);
  await waitOk(svc, account.token, syncId, 60_000);
  const route = `/api/syncs/${syncId}/webhooks`;
  conforms(await request(svc.api, 'GET', route, { token: account.token }), 'get', '/api/syncs/{id}/webhooks');
  const shown = await request(svc.api, 'GET', `${route}/${webhookId}`, { token: account.token });
  conforms(shown, 'get', '/api/syncs/{id}/webhooks/{wid}');
  const badTopic = await request(svc.api, 'POST', route, { token: account.token, body: { url: receiverUrl, topics: ['svc.elsewhere.tasks'] } });
  assert.is(badTopic.status, 400);
  conforms(badTopic, 'post', '/api/syncs/{id}/webhooks');

  const deliveries = await waitFor(
    'exhausted deliveries',
    async () => {
      const answer = await request(svc.api, 'GET', `${route}/${webhookId}/deliveries?status=exhausted&limit=10`, { token: account.token });
      return answer.body?.data?.length >= 2 ? answer : undefined;
    },
    30_000,
  );
  conforms(deliveries, 'get', '/api/syncs/{id}/webhooks/{wid}/deliveries');
  const badLimit = await request(svc.api, 'GET', `${route}/${webhookId}/deliveries?limit=0`, { token: account.token });
  assert.is(badLimit.status, 400);
  assert.is(badLimit.body.error.message, 'limit: must be a whole number from 1 to 1000');
  conforms(badLimit, 'get', '/api/syncs/{id}/webhooks/{wid}/deliveries');
  const twice = await request(svc.api, 'GET', `${route}/${webhookId}/deliveries?status=exhausted&status=pending`, { token: account.token });
  assert.is(twice.status, 400);
  assert.is(twice.body.error.message, 'status: give it once');

  const replayed = await request(svc.api, 'POST', `${route}/${webhookId}/deliveries/replay`, { token: account.token });
  assert.is(replayed.status, 202, replayed.text);
  assert.ok(replayed.body.replayed >= 2);
  conforms(replayed, 'post', '/api/syncs/{id}/webhooks/{wid}/deliveries/replay');
  const unknown = await request(svc.api, 'POST', `${route}/${webhookId}/deliveries/replay`, { token: account.token, body: { ids: ['999999'] } });
  assert.is(unknown.status, 404);
  conforms(unknown, 'post', '/api/syncs/{id}/webhooks/{wid}/deliveries/replay');

  const created = await request(svc.api, 'POST', route, {
    token: account.token,
    body: { url: receiverUrl, topics: [`svc.${syncId}.tasks`], filter: { events: ['inserted'], where: { name: { in: ['a', 'b'] } } }, max_per_second: 10 },
  });
  assert.is(created.status, 201, created.text);
  conforms(created, 'post', '/api/syncs/{id}/webhooks');
  const unknownColumn = await request(svc.api, 'POST', route, {
    token: account.token,
    body: { url: receiverUrl, topics: [`svc.${syncId}.tasks`], filter: { changed: ['nome'] } },
  });
  assert.is(unknownColumn.status, 400);
  conforms(unknownColumn, 'post', '/api/syncs/{id}/webhooks');
  const hook = `${route}/${created.body.id}`;
  const changed = await request(svc.api, 'PATCH', hook, { token: account.token, body: { enabled: false, filter: null } });
  assert.is(changed.status, 200, changed.text);
  assert.is(changed.body.state, 'disabled');
  conforms(changed, 'patch', '/api/syncs/{id}/webhooks/{wid}');
  const notBoolean = await request(svc.api, 'PATCH', hook, { token: account.token, body: { enabled: 'no' } });
  assert.is(notBoolean.status, 400);
  conforms(notBoolean, 'patch', '/api/syncs/{id}/webhooks/{wid}');
  const rotated = await request(svc.api, 'POST', `${hook}/rotate-secret`, { token: account.token, body: { previous_expires_in: 60 } });
  assert.is(rotated.status, 200, rotated.text);
  conforms(rotated, 'post', '/api/syncs/{id}/webhooks/{wid}/rotate-secret');
  conforms(await request(svc.api, 'GET', hook, { token: account.token }), 'get', '/api/syncs/{id}/webhooks/{wid}');
  const recovered = await request(svc.api, 'POST', `${hook}/recover`, { token: account.token, body: { since: new Date(Date.now() - 60_000).toISOString() } });
  assert.is(recovered.status, 202, recovered.text);
  conforms(recovered, 'post', '/api/syncs/{id}/webhooks/{wid}/recover');
  const future = await request(svc.api, 'POST', `${hook}/recover`, { token: account.token, body: { since: '2999-01-01T00:00:00Z' } });
  assert.is(future.status, 422);
  conforms(future, 'post', '/api/syncs/{id}/webhooks/{wid}/recover');
  const deleted = await request(svc.api, 'DELETE', `${route}/${created.body.id}`, { token: account.token });
  conforms(deleted, 'delete', '/api/syncs/{id}/webhooks/{wid}');
  const gone = await request(svc.api, 'GET', `${route}/${created.body.id}`, { token: account.token });
  assert.is(gone.status, 404);
  conforms(gone, 'get', '/api/syncs/{id}/webhooks/{wid}');
  const rotateGone = await request(svc.api, 'POST', `${hook}/rotate-secret`, { token: account.token });
  assert.is(rotateGone.status, 404);
  conforms(rotateGone, 'post', '/api/syncs/{id}/webhooks/{wid}/rotate-secret');
});

test('wait: caught up, timed out, bad timeout', async () => {
  const caughtUp = await request(svc.api, 'GET', `/api/wait/${syncId}?timeout=30000`, { token: account.token });
  assert.is(caughtUp.body.ok, true, caughtUp.text);
  conforms(caughtUp, 'get', '/api/wait/{id}');
  const timedOut = await request(svc.api, 'GET', `/api/wait/${syncId}?timeout=0`, { token: account.token });
  assert.equal(timedOut.body, { ok: false, reason: 'timeout' });
  conforms(timedOut, 'get', '/api/wait/{id}');
  const bad = await request(svc.api, 'GET', `/api/wait/${syncId}?timeout=soon`, { token: account.token });
  assert.is(bad.status, 400);
  assert.is(bad.body.error.message, 'timeout: must be a whole number of milliseconds from 0 to 600000');
  conforms(bad, 'get', '/api/wait/{id}');
});

test("the service's and the console's routes", async () => {
  conforms(await request(svc.api, 'GET', '/healthz'), 'get', '/healthz');
  conforms(await request(svc.api, 'GET', '/metrics', { token: svc.adminToken }), 'get', '/metrics');
  conforms(await request(svc.api, 'GET', '/'), 'get', '/');
  conforms(await request(svc.api, 'GET', '/console/app.js'), 'get', '/console/{file}');
  conforms(await request(svc.api, 'GET', '/console/nothing.js'), 'get', '/console/{file}');
  // Upstream notifications: this sync has no hook (the service has no public URL).
  const notHooked = await request(svc.api, 'POST', `/hooks/airtable/${syncId}`, { body: { base: { id: 'appX' } } });
  assert.is(notHooked.status, 404);
  conforms(notHooked, 'post', '/hooks/{kind}/{id}');
  // A stable attachment link this service never signed (test/airtable.attachments.test.ts follows real ones).
  const forged = await request(svc.api, 'GET', `/attachments/${syncId}/tblAAAAAAAAAAAAAA/recAAAAAAAAAAAAAA/attAAAAAAAAAAAAAA/${'A'.repeat(22)}`);
  assert.is(forged.status, 404);
  conforms(forged, 'get', '/attachments/{sync}/{table}/{record}/{attachment}/{mac}');
  const badSize = await request(svc.api, 'GET', `/attachments/${syncId}/tblAAAAAAAAAAAAAA/recAAAAAAAAAAAAAA/attAAAAAAAAAAAAAA/${'A'.repeat(22)}?size=huge`);
  assert.is(badSize.status, 400);
  conforms(badSize, 'get', '/attachments/{sync}/{table}/{record}/{attachment}/{mac}');

  const tables = await request(svc.api, 'GET', `/api/syncs/${syncId}/tables`, { token: account.token });
  assert.equal(
    tables.body.data.map((t: { name: string }) => t.name),
    ['tasks'],
  );
  conforms(tables, 'get', '/api/syncs/{id}/tables');
  conforms(await request(svc.api, 'GET', `/api/syncs/${syncId}/history?hours=1`, { token: account.token }), 'get', '/api/syncs/{id}/history');
  const badHours = await request(svc.api, 'GET', `/api/syncs/${syncId}/history?hours=99`, { token: account.token });
  assert.is(badHours.status, 400);
  conforms(badHours, 'get', '/api/syncs/{id}/history');
  conforms(await request(svc.api, 'GET', `/api/syncs/${syncId}/connection`, { token: account.token }), 'get', '/api/syncs/{id}/connection');
  conforms(await request(svc.api, 'POST', `/api/syncs/${syncId}/events-credentials`, { token: account.token }), 'post', '/api/syncs/{id}/events-credentials');

  const signedIn = await request(svc.api, 'POST', '/console/session', { body: { token: account.token } });
  assert.is(signedIn.status, 200, signedIn.text);
  conforms(signedIn, 'post', '/console/session');
  const cookie = signedIn.headers.get('set-cookie')!.split(';')[0]!;
  conforms(await request(svc.api, 'GET', '/console/session', { headers: { cookie } }), 'get', '/console/session');
  const noCsrf = await request(svc.api, 'DELETE', '/console/session', { headers: { cookie } });
  assert.is(noCsrf.status, 403);
  conforms(noCsrf, 'delete', '/console/session');
  const signedOut = await request(svc.api, 'DELETE', '/console/session', { headers: { cookie, 'x-csrf-token': signedIn.body.csrf_token } });
  conforms(signedOut, 'delete', '/console/session');
  const ended = await request(svc.api, 'GET', '/console/session', { headers: { cookie } });
  assert.is(ended.status, 401);
  conforms(ended, 'get', '/console/session');
  const wrongToken = await request(svc.api, 'POST', '/console/session', { body: { token: 'trb_nope' } });
  assert.is(wrongToken.status, 401);
  conforms(wrongToken, 'post', '/console/session');
});

test('real answers reached every documented route', () => {
  // Each route was answered for real at least once (401s included), with a schema check.
  const reached = new Set([...checked].map((c) => c.split(' ').slice(0, 2).join(' ')));
  const missed = routesOf(layers())
    .map(({ method, route }) => `${method.toUpperCase()} ${openApiPath(route)}`)
    .filter((name) => !reached.has(name));
  assert.equal(missed, []);
  if (process.env.TEST_VERBOSE) process.stdout.write(`${checked.size} answers checked against the document\n`);
});

test.run();
