/**
 * The stable links' locator (src/attachments/locator.ts): the reads of one table's records that
 * arrive together are one read of the upstream (a page of images asks for all of them at once),
 * at most 50 records each; a record read lately is served from memory until its URLs may be
 * stale, a gone one for a minute; one that lacks an attachment asked for is read again at once
 * (the link was made from a later read), and an attachment found gone is remembered a minute.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { AttachmentLocator, type ReadRecords } from '../src/attachments/locator.ts';
import type { AttachmentUrls } from '../src/kinds/kind.ts';

/** An upstream of records `rec0`…: each with attachments `att<record>a` and, once added, more. */
function upstream() {
  const reads: string[][] = [];
  const extra = new Map<string, string>();
  let version = 0;
  const read: ReadRecords = async (ids) => {
    reads.push(ids);
    version++;
    const found = new Map<string, Map<string, AttachmentUrls>>();
    for (const id of ids) {
      if (id === 'recGone') continue;
      const files = new Map([[`att${id}a`, { url: `https://files.example/${id}/a?v=${version}`, thumbnails: {} }]]);
      const added = extra.get(id);
      if (added) files.set(added, { url: `https://files.example/${id}/${added}?v=${version}`, thumbnails: {} });
      found.set(id, files);
    }
    return found;
  };
  return { read, reads, extra };
}

test('records asked for together are one read, 50 at most, and each gets its own', async () => {
  const locator = new AttachmentLocator({ ttlMs: 60_000 });
  const up = upstream();
  const ids = Array.from({ length: 51 }, (_, i) => `rec${i}`);
  const located = await Promise.all(ids.map((id) => locator.record('syn_a', 'tblA', id, `att${id}a`, up.read)));
  assert.equal(
    up.reads.map((r) => r.length),
    [50, 1],
  );
  for (const [i, l] of located.entries()) assert.match(l.attachments!.get(`attrec${i}a`)!.url, new RegExp(`/rec${i}/a\\?v=`));
  // Another table (or sync) is a read of its own.
  await Promise.all([locator.record('syn_a', 'tblB', 'rec0', 'attrec0a', up.read), locator.record('syn_b', 'tblA', 'rec0', 'attrec0a', up.read)]);
  assert.is(up.reads.length, 4);
});

test('a record read lately is served from memory; once stale it is read again', async () => {
  const locator = new AttachmentLocator({ ttlMs: 200 });
  const up = upstream();
  const first = await locator.record('syn_a', 'tblA', 'rec1', 'attrec1a', up.read);
  const again = await locator.record('syn_a', 'tblA', 'rec1', 'attrec1a', up.read);
  assert.is(again, first);
  assert.is(up.reads.length, 1);
  await new Promise((resolve) => setTimeout(resolve, 250));
  const later = await locator.record('syn_a', 'tblA', 'rec1', 'attrec1a', up.read);
  assert.is(up.reads.length, 2);
  assert.is.not(later.attachments!.get('attrec1a')!.url, first.attachments!.get('attrec1a')!.url);
});

test('a gone record is remembered as gone; a newer attachment is read again at once, a gone one once a minute', async () => {
  const locator = new AttachmentLocator({ ttlMs: 60_000 });
  const up = upstream();
  assert.is((await locator.record('syn_a', 'tblA', 'recGone', 'attx', up.read)).attachments, undefined);
  await locator.record('syn_a', 'tblA', 'recGone', 'attx', up.read);
  assert.is(up.reads.length, 1);
  await locator.record('syn_a', 'tblA', 'rec2', 'attrec2a', up.read);
  // Added a moment after the record was read: its link (signed, so made from a later read) must work at once.
  up.extra.set('rec2', 'attNew');
  assert.ok((await locator.record('syn_a', 'tblA', 'rec2', 'attNew', up.read)).attachments!.has('attNew'));
  assert.is(up.reads.length, 3);
  // An attachment since removed is read again once, then remembered as gone.
  up.extra.delete('rec2');
  await new Promise((resolve) => setTimeout(resolve, 10));
  assert.is((await locator.record('syn_a', 'tblA', 'rec2', 'attRemoved', up.read)).attachments!.has('attRemoved'), false);
  assert.is((await locator.record('syn_a', 'tblA', 'rec2', 'attRemoved', up.read)).attachments!.has('attRemoved'), false);
  assert.is(up.reads.length, 4);
  assert.ok((await locator.record('syn_a', 'tblA', 'rec2', 'attrec2a', up.read)).attachments!.has('attrec2a'));
  assert.is(up.reads.length, 4);
});

test.run();
