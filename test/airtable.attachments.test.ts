/**
 * Stable attachment links (docs/airtable.md#attachments): with `stable_attachment_links` an
 * attachment column (and a lookup of one) holds signed links of the service's, each answered
 * with a redirect to a fresh Airtable URL. The fake's URLs expire as Airtable's do: once its
 * clock has moved past them, the old URL answers 410, the sweeps renew nothing in the rows
 * (no writes, no events), and the link reads the record again for a URL that works. A sync
 * without the setting, beside it, rewrites its rows for the same renewal. Links of other
 * syncs, forged ones and revoked ones (the setting off, the sync deleted) answer 404.
 */
import Airtable, { type Attachment, type FieldSet } from 'airtable';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { FakeBase } from '../fakes/airtable/index.ts';
import { query } from './harness/postgres.ts';
import { waitFor } from './harness/process.ts';
import {
  AIRTABLE_TEST_TOKEN,
  createAccount,
  createAirtableSync,
  loudSetUp,
  request,
  startTestService,
  type TestAccount,
  type TestService,
} from './harness/service.ts';

const HOUR = 3_600_000;
/** How long the route hands out a URL it read: short, so the test sees it read again. */
const URL_TTL_MS = 1_500;

let svc: TestService;
let account: TestAccount;
let other: TestAccount;
let base: FakeBase;
let linked: { id: string; readerUrl: string; adminUrl: string };
let plain: { id: string; readerUrl: string; adminUrl: string };
let docsTable: string;

test.before(
  loudSetUp(
    async () => {
      svc = await startTestService({
        config: { roles: ['api', 'sync', 'decoder', 'proxy'] },
        tunables: { airtable: { pollIntervalMs: 300, cycleGapMs: 300, pacedCycleMs: 0 }, workerTickMs: 200, attachmentUrlTtlMs: URL_TTL_MS },
      });
      account = await createAccount(svc, 'links');
      other = await createAccount(svc, 'plain');
      base = svc.airtable.createBase({ name: 'Files' });
      docsTable = base.createTable('Docs', [
        { name: 'Name', type: 'singleLineText' },
        { name: 'Files', type: 'multipleAttachments' },
      ]).id;
      const docs = base.createRecords('Docs', [
        { Name: 'one', Files: [{ url: 'https://example.com/a.png' }, { url: 'https://example.com/b.pdf' }] },
        { Name: 'two', Files: [{ url: 'https://example.com/c.txt' }] },
        { Name: 'none' },
      ]);
      base.createTable('Refs', [{ name: 'Name', type: 'singleLineText' }]);
      const link = base.addField('Refs', { name: 'Doc', type: 'multipleRecordLinks', options: { linkedTableId: docsTable } });
      base.addField('Refs', {
        name: 'Doc files',
        type: 'multipleLookupValues',
        options: { recordLinkFieldId: link.id, fieldIdInLinkedTable: base.table('Docs').fields.find((f) => f.name === 'Files')!.id },
      });
      base.createRecords('Refs', [{ Name: 'ref', Doc: [docs[0]!.id] }]);
      linked = await createAirtableSync(svc, account, base.id, { stable_attachment_links: true });
      plain = await createAirtableSync(svc, other, base.id);
    },
    () => svc,
  ),
);

test.after(async () => {
  await svc?.stop();
});

const follow = (url: string) => fetch(url, { redirect: 'manual' });
const docRows = (db: string) => query<{ id: string; name: string; files: string[] | null }>(db, 'SELECT id, name, files FROM docs ORDER BY name');
const linkOf = (recordId: string, attachmentId: string) =>
  new RegExp(`^${svc.api}/attachments/${linked.id}/${docsTable}/${recordId}/${attachmentId}/[A-Za-z0-9_-]{22}$`);
const fakeAttachment = (id: string) =>
  base
    .records('Docs')
    .flatMap((r) => (r.fields.Files as Array<{ id: string; url: string }> | undefined) ?? [])
    .find((a) => a.id === id)!;

test('the columns hold one signed link per attachment, lookups too; a sync without the setting keeps Airtable’s URLs', async () => {
  const rows = await docRows(linked.readerUrl);
  const upstream = base.records('Docs');
  for (const row of rows) {
    const files = (upstream.find((r) => r.id === row.id)!.fields.Files as Array<{ id: string }> | undefined) ?? [];
    if (files.length === 0) assert.is(row.files, null, row.name);
    else assert.equal(row.files!.length, files.length);
    for (const [i, file] of files.entries()) assert.match(row.files![i]!, linkOf(row.id, file.id));
  }
  const [ref] = await query<{ id: string; doc_files: string[] }>(linked.readerUrl, 'SELECT id, doc_files FROM refs');
  assert.is(ref!.doc_files.length, 2);
  // A lookup's link names the record it is in: that record's copy is what is read again.
  for (const l of ref!.doc_files) assert.match(l, new RegExp(`^${svc.api}/attachments/${linked.id}/${base.table('Refs').id}/${ref!.id}/att`));
  const plainRows = await docRows(plain.readerUrl);
  assert.match(plainRows.find((r) => r.name === 'one')!.files![0]!, new RegExp(`^${svc.airtable.url}/attachments/att`));
});

test('a link redirects to the file’s current Airtable URL, and to a thumbnail by size', async () => {
  const one = (await docRows(linked.readerUrl)).find((r) => r.name === 'one')!;
  const answer = await follow(one.files![0]!);
  assert.is(answer.status, 302);
  const location = answer.headers.get('location')!;
  const image = fakeAttachment(location.split('/')[4]!);
  assert.ok(image, `the redirect names an attachment of the base: ${location}`);
  assert.match(one.files![0]!, linkOf(one.id, image.id));
  assert.match(answer.headers.get('cache-control')!, /^private, max-age=[01]$/);
  const file = await fetch(location);
  assert.is(file.status, 200);
  assert.is(await file.text(), `fake attachment ${image.id}\n`);
  const thumbnail = await follow(`${one.files![0]!}?size=small`);
  assert.is(thumbnail.status, 302);
  assert.match(thumbnail.headers.get('location')!, new RegExp(`/attachments/${image.id}-36/`));
  // The lookup's link: the same file, through the record that looks it up.
  const [ref] = await query<{ doc_files: string[] }>(linked.readerUrl, 'SELECT doc_files FROM refs');
  const looked = await follow(ref!.doc_files[0]!);
  assert.is(looked.status, 302);
  assert.match(looked.headers.get('location')!, new RegExp(`/attachments/${image.id}/`));
});

test('forged, foreign and malformed links are refused alike, and a bad size is a 400', async () => {
  const link = (await docRows(linked.readerUrl)).find((r) => r.name === 'one')!.files![0]!;
  const mac = link.split('/').pop()!;
  const flipped = `${link.slice(0, -1)}${mac.endsWith('A') ? 'B' : 'A'}`;
  const otherSync = link.replace(linked.id, plain.id);
  const otherRecord = link.replace(/\/rec[A-Za-z0-9]+\//, '/recAAAAAAAAAAAAAA/');
  const parts = link.split('/');
  parts[parts.length - 2] += '%2F..%2F';
  const traversal = parts.join('/');
  const answers = await Promise.all([flipped, otherSync, otherRecord, `${link}x`, traversal].map(follow));
  for (const answer of answers) {
    assert.is(answer.status, 404, answer.url);
    const body = await answer.json();
    assert.is(body.error.code, 'not_found', answer.url);
    assert.match(body.error.message, /^no such attachment/, `${answer.url}: ${body.error.message}`);
  }
  const bad = await follow(`${link}?size=huge`);
  assert.is(bad.status, 400);
  assert.match((await bad.json()).error.message, /size/);
});

test('a proxied create holds links at once, and a quick update after it keeps them', async () => {
  const client = new Airtable({ apiKey: AIRTABLE_TEST_TOKEN, endpointUrl: `http://127.0.0.1:${svc.service.proxyPort}` }).base(base.id);
  // Airtable's typings want a whole attachment; a create gives its URL alone.
  const created = await client.table('Docs').create({ Name: 'proxied', Files: [{ url: 'https://example.com/d.png' }] } as unknown as FieldSet);
  const [row] = await query<{ files: string[] }>(linked.readerUrl, 'SELECT files FROM docs WHERE id = $1', [created.id]);
  const attachment = (created.fields.Files as readonly Attachment[])[0]!;
  assert.match(row!.files[0]!, linkOf(created.id, attachment.id));
  await client.table('Docs').update([{ id: created.id, fields: { Name: 'proxied, renamed' } }]);
  const [after] = await query<{ name: string; files: string[] }>(linked.readerUrl, 'SELECT name, files FROM docs WHERE id = $1', [created.id]);
  assert.equal(after, { name: 'proxied, renamed', files: row!.files });
  const answer = await follow(row!.files[0]!);
  assert.is(answer.status, 302);
  assert.match(answer.headers.get('location')!, new RegExp(`/attachments/${attachment.id}/`));
});

test('Airtable’s URLs expire: renewals write nothing, and the link reads the record again', async () => {
  const link = (await docRows(linked.readerUrl)).find((r) => r.name === 'two')!.files![0]!;
  const before = (await follow(link)).headers.get('location')!;
  const versions = (db: string) =>
    query<{ id: string; xmin: string }>(db, 'SELECT id, xmin::text FROM docs UNION ALL SELECT id, xmin::text FROM refs ORDER BY id');
  const events = async (syncId: string) => (await query<{ n: string }>(svc.controlUrl, 'SELECT count(*) AS n FROM events WHERE sync_id = $1', [syncId]))[0]!.n;
  const linkedVersions = await versions(linked.adminUrl);
  const linkedEvents = await events(linked.id);
  const plainBefore = await docRows(plain.readerUrl);

  svc.airtable.advanceClock(3 * HOUR);
  assert.is((await fetch(before)).status, 410, 'the URL read before has expired');
  // The sync without the setting renews its URLs: its rows change. Then the other has swept too.
  await waitFor(
    'the plain sync’s renewed URLs',
    async () =>
      (await docRows(plain.readerUrl)).find((r) => r.name === 'two')!.files![0] !== plainBefore.find((r) => r.name === 'two')!.files![0] ? true : undefined,
    60_000,
    200,
  );
  const sweptFrom = Date.now();
  await waitFor(
    'a sweep of the linked sync after the clock moved',
    async () => {
      const status = (await request(svc.api, 'GET', `/api/syncs/${linked.id}`, { token: account.token })).body.status;
      return status.completed_at && Date.parse(status.completed_at) > sweptFrom ? true : undefined;
    },
    60_000,
    200,
  );
  await request(svc.api, 'GET', `/api/wait/${linked.id}`, { token: account.token });
  assert.equal(await versions(linked.adminUrl), linkedVersions, 'no row was written');
  assert.is(await events(linked.id), linkedEvents, 'no event');

  await new Promise((resolve) => setTimeout(resolve, URL_TTL_MS + 100));
  const renewed = await follow(link);
  assert.is(renewed.status, 302);
  const after = renewed.headers.get('location')!;
  assert.is.not(after, before);
  assert.is((await fetch(after)).status, 200);
});

test('links stop working when the setting is turned off, and when the sync is deleted', async () => {
  const link = (await docRows(linked.readerUrl)).find((r) => r.name === 'one')!.files![0]!;
  const patched = await request(svc.api, 'PATCH', `/api/syncs/${linked.id}`, { token: account.token, body: { settings: { stable_attachment_links: false } } });
  assert.is(patched.status, 200);
  assert.is(patched.body.settings.stable_attachment_links, false);
  await waitFor('the link refused', async () => ((await follow(link)).status === 404 ? true : undefined), 20_000, 250);
  // The columns are rebuilt with Airtable's URLs.
  await waitFor(
    'the rebuilt column',
    async () => ((await docRows(linked.readerUrl)).find((r) => r.name === 'one')!.files![0]!.startsWith(`${svc.airtable.url}/attachments/`) ? true : undefined),
    60_000,
    250,
  );

  // The plain sync turns it on: links appear, work, and end with the sync.
  await request(svc.api, 'PATCH', `/api/syncs/${plain.id}`, { token: other.token, body: { settings: { stable_attachment_links: true } } });
  const plainLink = await waitFor(
    'links in the plain sync',
    async () => {
      const l = (await docRows(plain.readerUrl)).find((r) => r.name === 'one')!.files![0]!;
      return l.startsWith(`${svc.api}/attachments/${plain.id}/`) ? l : undefined;
    },
    60_000,
    250,
  );
  assert.is((await follow(plainLink)).status, 302);
  assert.is((await request(svc.api, 'DELETE', `/api/syncs/${plain.id}`, { token: other.token })).status, 200);
  await waitFor('the deleted sync’s link refused', async () => ((await follow(plainLink)).status === 404 ? true : undefined), 20_000, 250);
});

test.run();
