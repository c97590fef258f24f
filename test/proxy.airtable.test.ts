/**
 * The write-through proxy with Airtable: airtable.js pointed at `{proxy}/api.airtable.com`
 * creates, updates, upserts and deletes records; a SQL read right after each answer sees the
 * change with its computed fields; the answers are the fake's bytes; svc-translate maps
 * database names; refusals of everything that is not a plain request to an allowed host.
 */
import Airtable from 'airtable';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { AIRTABLE_RULE } from '../src/airtable/client.ts';
import type { FakeBase } from '../fakes/airtable/index.ts';
import { airtableJs as ok } from './harness/airtable.ts';
import { query } from './harness/postgres.ts';
import { airtableSyncBehindProxy, endToEnd, rawRequest, rawSocket, startProxy, startTap, type TestProxy } from './harness/proxy.ts';
import { AIRTABLE_TEST_TOKEN, createAccount, loudSetUp, startTestService, type TestAccount, type TestService } from './harness/service.ts';

let svc: TestService;
let account: TestAccount;
let base: FakeBase;
let proxy: TestProxy;
let reader: string;
let airtable: Airtable.Base;
let acme = '';
let globex = '';

const auth = { authorization: `Bearer ${AIRTABLE_TEST_TOKEN}`, 'content-type': 'application/json' };

test.before(
  loudSetUp(
    async () => {
      svc = await startTestService({
        config: { roles: ['api', 'sync', 'proxy'] },
        // Quota and 429s are proxy.quota.test.ts's subject, with the fake in its own process.
        airtable: { rateLimit: false },
        // Sweeps are rare here; a sweep page crossing a proxied write is proxy.sweep-race.test.ts's subject.
        tunables: { airtable: { pollIntervalMs: 250, cycleGapMs: 120_000 }, workerTickMs: 250 },
      });
      account = await createAccount(svc);
      base = svc.airtable.createBase({ name: 'Proxy base' });
      base.createTable('Clients', [
        { name: 'Name', type: 'singleLineText' },
        { name: 'Revenue', type: 'currency' },
      ]);
      base.createTable('Projects 🚀', [
        { name: 'Name', type: 'singleLineText' },
        { name: 'Budget', type: 'number', options: { precision: 0 } },
        { name: 'Status', type: 'singleSelect', options: { choices: [{ name: 'Todo' }, { name: 'Done' }] } },
      ]);
      const clients = base.table('Clients');
      const link = base.addField('Projects 🚀', { name: 'Clients', type: 'multipleRecordLinks', options: { linkedTableId: clients.id } });
      base.addField('Projects 🚀', {
        name: 'Client names',
        type: 'multipleLookupValues',
        options: { recordLinkFieldId: link.id, fieldIdInLinkedTable: clients.primaryFieldId },
      });
      base.addField('Projects 🚀', { name: 'Double', type: 'formula', options: { formula: '{Budget} * 2' } });
      base.addField('Projects 🚀', { name: 'Shout', type: 'formula', options: { formula: 'UPPER({Name})' } });
      [acme, globex] = base
        .createRecords('Clients', [
          { Name: 'Acme', Revenue: 1000 },
          { Name: 'Globex', Revenue: 250 },
        ])
        .map((r) => r.id) as [string, string];
      base.createRecords('Projects 🚀', [{ Name: 'Seed', Budget: 1 }]);

      ({ reader, proxy, airtable } = await airtableSyncBehindProxy(svc, account.token, base.id));
    },
    () => svc,
  ),
);

test.after(async () => {
  await proxy?.stop();
  await svc?.stop();
});

type ProjectRow = {
  id: string;
  name: string | null;
  budget: string | null;
  status: string | null;
  clients: string[] | null;
  client_names: string[] | null;
  double: string | null;
  shout: string | null;
};
const project = async (id: string) => (await query<ProjectRow>(reader, 'SELECT * FROM projects WHERE id = $1', [id]))[0];

test('airtable.js creates through the proxy: the row is there at once, lookup and formulas included', async () => {
  const one = await ok(airtable('Projects 🚀').create({ Name: 'Alpha', Budget: 100, Status: 'Todo', Clients: [acme] }));
  const row = await project(one.id);
  assert.ok(row, 'the created record is in the database when the answer arrives');
  assert.equal(
    [row!.name, row!.budget, row!.status, row!.clients, row!.client_names, row!.double, row!.shout],
    ['Alpha', '100', 'Todo', [acme], ['Acme'], '200', 'ALPHA'],
  );

  const batch = await ok(
    airtable('Projects 🚀').create([
      { fields: { Name: 'Beta', Budget: 5, Clients: [acme, globex] } },
      { fields: { Name: 'Gamma' } },
      { fields: { Name: 'Delta', Budget: 7 } },
    ]),
  );
  const rows = await query<ProjectRow>(reader, 'SELECT * FROM projects WHERE id = ANY($1) ORDER BY name', [batch.map((r) => r.id)]);
  assert.equal(
    rows.map((r) => [r.name, r.double, r.client_names]),
    [
      ['Beta', '10', ['Acme', 'Globex']],
      ['Delta', '14', null],
      ['Gamma', '0', null],
    ],
  );
});

test('updates (PATCH merge, PUT replace, upsert) land before the answer', async () => {
  const [rec] = await ok(airtable('Projects 🚀').create([{ fields: { Name: 'Epsilon', Budget: 10, Status: 'Todo' } }]));
  const updated = await ok(airtable('Projects 🚀').update(rec!.id, { Budget: 11, Clients: [globex] }));
  assert.is(updated.get('Budget'), 11);
  let row = await project(rec!.id);
  assert.equal([row!.budget, row!.double, row!.status, row!.client_names], ['11', '22', 'Todo', ['Globex']]);

  await ok(airtable('Projects 🚀').replace(rec!.id, { Name: 'Epsilon 2' }));
  row = await project(rec!.id);
  assert.equal([row!.name, row!.budget, row!.status, row!.clients, row!.shout], ['Epsilon 2', null, null, null, 'EPSILON 2'], 'PUT clears unsent fields');

  const upsert = await rawRequest(proxy.url, 'PATCH', `/api.airtable.com/v0/${base.id}/${encodeURIComponent('Projects 🚀')}`, {
    headers: auth,
    body: JSON.stringify({
      performUpsert: { fieldsToMergeOn: ['Name'] },
      records: [{ fields: { Name: 'Epsilon 2', Budget: 3 } }, { fields: { Name: 'Zeta', Budget: 4 } }],
    }),
  });
  assert.is(upsert.status, 200, upsert.body.toString());
  assert.is(upsert.json.updatedRecords.length, 1);
  assert.is(upsert.json.createdRecords.length, 1);
  const rows = await query<ProjectRow>(reader, "SELECT * FROM projects WHERE name IN ('Epsilon 2', 'Zeta') ORDER BY name", []);
  assert.equal(
    rows.map((r) => [r.name, r.budget, r.double]),
    [
      ['Epsilon 2', '3', '6'],
      ['Zeta', '4', '8'],
    ],
  );
});

test('deletes, one and a batch, remove the rows before the answer', async () => {
  const made = await ok(airtable('Projects 🚀').create([{ fields: { Name: 'Del 1' } }, { fields: { Name: 'Del 2' } }, { fields: { Name: 'Del 3' } }]));
  const ids = made.map((r) => r.id);
  assert.is((await query(reader, 'SELECT 1 FROM projects WHERE id = ANY($1)', [ids])).length, 3);
  await ok(airtable('Projects 🚀').destroy(ids[0]!));
  assert.is((await query(reader, 'SELECT 1 FROM projects WHERE id = ANY($1)', [ids])).length, 2);
  await ok(airtable('Projects 🚀').destroy([ids[1]!, ids[2]!]));
  assert.is((await query(reader, 'SELECT 1 FROM projects WHERE id = ANY($1)', [ids])).length, 0);
});

test('returnFieldsByFieldId answers are mapped by field id', async () => {
  const table = base.table('Projects 🚀');
  const budget = table.fields.find((f) => f.name === 'Budget')!.id;
  const name = table.fields.find((f) => f.name === 'Name')!.id;
  const answer = await rawRequest(proxy.url, 'POST', `/v0/${base.id}/${table.id}`, {
    headers: auth,
    body: JSON.stringify({ records: [{ fields: { [name]: 'ById', [budget]: 21 } }], returnFieldsByFieldId: true }),
  });
  assert.is(answer.status, 200, answer.body.toString());
  const row = await project(answer.json.records[0].id);
  assert.equal([row!.name, row!.budget, row!.double], ['ById', '21', '42']);
});

test('the answers the client gets are the upstream bytes', async () => {
  const tap = await startTap(svc.airtable.url);
  const tapped = await startProxy(svc, { upstreams: new Map([['api.airtable.com', tap.url]]) });
  try {
    const path = `/api.airtable.com/v0/${base.id}/${encodeURIComponent('Projects 🚀')}`;
    const created = await rawRequest(tapped.url, 'POST', path, { headers: auth, body: JSON.stringify({ fields: { Name: 'Bytes', Budget: 2 } }) });
    const sent = tap.records.find((r) => r.method === 'POST')!;
    assert.is(created.status, sent.status);
    assert.ok(created.body.equals(sent.body), 'body bytes unchanged');
    assert.equal(endToEnd(created.rawHeaders), endToEnd(sent.rawHeaders));
    assert.ok(await project(created.json.id), 'and written through');

    const failed = await rawRequest(tapped.url, 'POST', path, { headers: auth, body: JSON.stringify({ fields: { Nope: 1 } }) });
    const refused = tap.records.at(-1)!;
    assert.is(failed.status, 422);
    assert.ok(failed.body.equals(refused.body), 'an upstream error comes back unchanged too');

    // A browser signed in to the console sends its session cookie to the proxy too (cookies
    // ignore ports): the session never leaves, other cookies do, unchanged.
    const session = (cookie: string) => rawRequest(tapped.url, 'GET', path, { headers: { ...auth, cookie } });
    await session('theme=dark; tributary_session=s3cr3t; __Host-tributary_session=s3cr3t2; lang=en');
    assert.is(tap.records.at(-1)!.requestHeaders.cookie, 'theme=dark; lang=en');
    await session('tributary_session=s3cr3t');
    assert.is(tap.records.at(-1)!.requestHeaders.cookie, undefined, 'a Cookie header with only the session is dropped');
    assert.is(tap.records.at(-1)!.status, 200);

    // A listing (one page: a next-page offset is new on every call), direct and proxied: the same bytes.
    const list = `/v0/${base.id}/${encodeURIComponent('Projects 🚀')}?sort%5B0%5D%5Bfield%5D=Name`;
    // The direct request takes its slot of the base's quota like any other, or the fake would lock the base out.
    const grant = await proxy.limiter.acquire(base.id, AIRTABLE_RULE, { kind: 'client' });
    grant.sent();
    const direct = await rawRequest(svc.airtable.url, 'GET', list, { headers: auth });
    grant.answered();
    const viaProxy = await rawRequest(proxy.url, 'GET', `/api.airtable.com${list}`, { headers: auth });
    assert.is(viaProxy.status, 200);
    assert.ok(viaProxy.body.equals(direct.body));
  } finally {
    await tapped.stop();
    await tap.close();
  }
});

test('svc-translate: database table and column names are mapped to Airtable names', async () => {
  const created = await rawRequest(proxy.url, 'POST', `/api.airtable.com/v0/${base.id}/projects`, {
    headers: { ...auth, 'svc-translate': '1' },
    body: JSON.stringify({ records: [{ fields: { name: 'Translated', budget: 8, clients: [acme] } }] }),
  });
  assert.is(created.status, 200, created.body.toString());
  const id = created.json.records[0].id;
  assert.equal(created.json.records[0].fields.Name, 'Translated', 'the answer keeps Airtable names');
  assert.equal(base.records('Projects 🚀').find((r) => r.id === id)?.fields.Budget, 8);
  assert.equal((await project(id))!.client_names, ['Acme']);

  const patched = await rawRequest(proxy.url, 'PATCH', `/api.airtable.com/v0/${base.id}/projects/${id}`, {
    headers: { ...auth, 'svc-translate': '1' },
    body: JSON.stringify({ fields: { budget: 9 } }),
  });
  assert.is(patched.status, 200, patched.body.toString());
  assert.is((await project(id))!.double, '18');

  const listed = await rawRequest(
    proxy.url,
    'GET',
    `/api.airtable.com/v0/${base.id}/projects?fields%5B%5D=name&fields%5B%5D=budget&sort%5B0%5D%5Bfield%5D=budget&sort%5B0%5D%5Bdirection%5D=desc`,
    {
      headers: { ...auth, 'svc-translate': '1' },
    },
  );
  assert.is(listed.status, 200, listed.body.toString());
  const first = listed.json.records[0];
  assert.equal(Object.keys(first.fields).sort(), ['Budget', 'Name']);
  assert.is(first.fields.Budget, 100);

  const other = await rawRequest(proxy.url, 'GET', `/api.airtable.com/v0/appZZZZZZZZZZZZZZ/projects`, { headers: { ...auth, 'svc-translate': '1' } });
  assert.is(other.status, 422);
  assert.is(other.json.error.source, 'proxy');
  assert.match(other.json.error.message, /no active sync of base appZZZZZZZZZZZZZZ/);
});

test('refused: other hosts, traversal, absolute URLs, CONNECT, smuggling, oversize bodies', async () => {
  const h = `Authorization: Bearer ${AIRTABLE_TEST_TOKEN}\r\nHost: proxy\r\n`;
  const cases: Array<[string, string, number, RegExp?]> = [
    ['another host', `GET /evil.example.com/v0/x HTTP/1.1\r\n${h}\r\n`, 403, /only forwards to api\.airtable\.com and api\.stripe\.com/],
    ['userinfo trick', `GET /api.airtable.com@evil.example.com/v0/x HTTP/1.1\r\n${h}\r\n`, 403],
    ['a port', `GET /api.airtable.com:8443/v0/x HTTP/1.1\r\n${h}\r\n`, 403],
    ['traversal', `GET /api.airtable.com/../evil.example.com/x HTTP/1.1\r\n${h}\r\n`, 400, /traversal/],
    ['encoded traversal', `GET /api.airtable.com/v0/%2e%2e/%2E%2e/x HTTP/1.1\r\n${h}\r\n`, 400, /traversal/],
    ['traversal behind an encoded slash', `GET /api.airtable.com/v0/a%2f..%2f..%2fx HTTP/1.1\r\n${h}\r\n`, 400, /traversal/],
    ['backslashes', `GET /api.airtable.com/v0\\..\\x HTTP/1.1\r\n${h}\r\n`, 400],
    ['encoded backslash', `GET /api.airtable.com/v0/%5c..%5cx HTTP/1.1\r\n${h}\r\n`, 400],
    ['absolute URL', `GET http://api.airtable.com/v0/${base.id}/Clients HTTP/1.1\r\n${h}\r\n`, 400, /absolute-URL/],
    ['absolute URL to elsewhere', `GET http://evil.example.com/ HTTP/1.1\r\n${h}\r\n`, 400, /absolute-URL/],
    ['scheme-relative', `GET //evil.example.com/x HTTP/1.1\r\n${h}\r\n`, 400],
    ['CONNECT', `CONNECT api.airtable.com:443 HTTP/1.1\r\nHost: api.airtable.com:443\r\n\r\n`, 405, /CONNECT is refused/],
    ['TRACE', `TRACE /api.airtable.com/v0 HTTP/1.1\r\n${h}\r\n`, 405],
    [
      'Content-Length with Transfer-Encoding',
      `POST /api.airtable.com/v0/${base.id}/Clients HTTP/1.1\r\n${h}Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`,
      400,
    ],
    ['two Content-Lengths', `POST /api.airtable.com/v0/${base.id}/Clients HTTP/1.1\r\n${h}Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}`, 400],
    ['two equal Content-Lengths', `POST /api.airtable.com/v0/${base.id}/Clients HTTP/1.1\r\n${h}Content-Length: 2\r\nContent-Length: 2\r\n\r\n{}`, 400],
    [
      'a Transfer-Encoding other than chunked',
      `POST /api.airtable.com/v0/${base.id}/Clients HTTP/1.1\r\n${h}Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n`,
      400,
    ],
    ['a control character in a header', `GET /api.airtable.com/v0/${base.id}/Clients HTTP/1.1\r\n${h}X-Evil: a\u0001b\r\n\r\n`, 400],
    ['a header name with a space', `GET /api.airtable.com/v0/${base.id}/Clients HTTP/1.1\r\n${h}X Evil: 1\r\n\r\n`, 400],
    [
      'an oversize body (declared)',
      `POST /api.airtable.com/v0/${base.id}/Clients HTTP/1.1\r\n${h}Content-Length: 20000000\r\n\r\n{`,
      413,
      /exceeds the proxy's limit of 10 MiB/,
    ],
    ['the root', `GET / HTTP/1.1\r\n${h}\r\n`, 404],
  ];
  // Through a proxy whose upstream is a recording relay: nothing may reach it.
  const tap = await startTap(svc.airtable.url);
  const reported: Array<[string, number]> = [];
  const guarded = await startProxy(svc, {
    upstreams: new Map([['api.airtable.com', tap.url]]),
    metrics: { proxyRequest: (upstream, status) => reported.push([upstream, status]) },
  });
  try {
    for (const [what, text, status, message] of cases) {
      const answer = await rawSocket(guarded.url, text);
      assert.is(answer.status, status, `${what}: ${answer.text.slice(0, 300)}`);
      if (message) assert.match(answer.text, message, what);
      // A bare 400 without the proxy's body is Node's parser refusing it before the handler.
      if (status !== 400 || !/"source":"proxy"/.test(answer.text)) continue;
      assert.match(answer.text, /"code":"invalid_request"/, what);
    }
    assert.is(tap.records.length, 0, 'none of them reached the upstream');
    // Metrics: each refusal the handler answered, a refused host labelled "other".
    await new Promise((r) => setTimeout(r, 50));
    assert.ok(reported.length >= 10 && reported.every(([, status]) => status >= 400), JSON.stringify(reported));
    assert.ok(reported.some(([upstream, status]) => upstream === 'other' && status === 403));
  } finally {
    await guarded.stop();
    await tap.close();
  }

  // A streamed (chunked) body past the limit: cut at the limit, refused.
  const small = await startProxy(svc, { maxBodyBytes: 64 * 1024 });
  try {
    const chunk = 'x'.repeat(32 * 1024);
    const body = `${Array.from({ length: 4 }, () => `${(chunk.length).toString(16)}\r\n${chunk}\r\n`).join('')}0\r\n\r\n`;
    const streamed = await rawSocket(
      small.url,
      `POST /api.airtable.com/v0/${base.id}/Clients/listRecords HTTP/1.1\r\n${h}Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n${body}`,
    );
    assert.is(streamed.status, 413, streamed.text.slice(0, 300));
    const written = await rawSocket(
      small.url,
      `POST /api.airtable.com/v0/${base.id}/Clients HTTP/1.1\r\n${h}Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n${body}`,
    );
    assert.is(written.status, 413, written.text.slice(0, 300));
    assert.match(written.text, /"source":"proxy"/);
  } finally {
    await small.stop();
  }
});

test('504 when the upstream does not answer in time, 502 when it cannot be used', async () => {
  const quick = await startProxy(svc, { responseTimeoutMs: 500 });
  const nowhere = await startProxy(svc, { upstreams: new Map([['api.airtable.com', 'http://127.0.0.1:9']]) });
  try {
    svc.airtable.faults.add({ match: { path: /\/Clients$/, baseId: base.id }, kind: 'hang' });
    const hung = await rawRequest(quick.url, 'GET', `/api.airtable.com/v0/${base.id}/Clients`, { headers: auth });
    assert.is(hung.status, 504);
    assert.equal(hung.json.error.source, 'proxy');
    assert.is(hung.json.error.code, 'gateway_timeout');

    const refused = await rawRequest(nowhere.url, 'GET', `/api.airtable.com/v0/${base.id}/Clients`, { headers: auth });
    assert.is(refused.status, 502);
    assert.equal(refused.json.error, { source: 'proxy', code: 'bad_gateway', message: 'api.airtable.com could not be reached (ECONNREFUSED)' });

    svc.airtable.faults.add({ match: { method: 'POST', path: /\/Clients$/, baseId: base.id }, kind: 'truncate' });
    const cut = await rawRequest(proxy.url, 'POST', `/api.airtable.com/v0/${base.id}/Clients`, {
      headers: auth,
      body: JSON.stringify({ fields: { Name: 'Cut' } }),
    });
    assert.is(cut.status, 502);
    assert.is(cut.json.error.source, 'proxy');

    const upstreamError = await rawRequest(proxy.url, 'GET', `/api.airtable.com/v0/${base.id}/NoSuchTable`, { headers: auth });
    assert.is(upstreamError.status, 403, "upstream errors are the upstream's");
    assert.is(upstreamError.json.error.type, 'INVALID_PERMISSIONS_OR_MODEL_NOT_FOUND');
  } finally {
    svc.airtable.faults.clear();
    await quick.stop();
    await nowhere.stop();
  }
});

test("the service's own proxy port (main.ts) writes through the same way", async () => {
  const served = new Airtable({
    apiKey: AIRTABLE_TEST_TOKEN,
    endpointUrl: `http://127.0.0.1:${svc.service.proxyPort}/api.airtable.com`,
    noRetryIfRateLimited: true,
  }).base(base.id);
  const made = await ok(served('Projects 🚀').create({ Name: 'Served', Budget: 4, Clients: [globex] }));
  const row = await project(made.id);
  assert.equal([row!.name, row!.double, row!.client_names], ['Served', '8', ['Globex']]);
  const health = await rawRequest(`http://127.0.0.1:${svc.service.proxyPort}`, 'GET', '/healthz');
  assert.equal(health.json, { ok: true });
});

test('no credential in the logs', async () => {
  assert.ok(
    svc.logs.lines.some((l) => /"part":"proxy"/.test(l)),
    'the proxy logged',
  );
  assert.not.match(svc.logs.text, AIRTABLE_TEST_TOKEN);
  assert.not.match(svc.logs.text, AIRTABLE_TEST_TOKEN.split('.')[0]!);
});

test.run();
