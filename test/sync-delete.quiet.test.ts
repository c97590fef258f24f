/**
 * An ordinary delete of a running sync is routine: the service logs that the sync was deleted,
 * and no warning or error (a decoder that loses its database under it, a runner whose database
 * is gone) as if something had failed.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { pause } from '../src/time.ts';
import { waitFor } from './harness/process.ts';
import { request } from './harness/service.ts';
import { backfilledStripeSync, type StripeSyncSetUp } from './harness/stripe-sync.ts';

let s: StripeSyncSetUp;

test.before(async () => {
  s = await backfilledStripeSync({
    key: 'sk_test_QUIETDELETEQUIETDELETE00',
    seed: 59,
    customers: 3,
    pollIntervalMs: 300,
    config: { roles: ['api', 'proxy', 'events', 'sync', 'decoder'] },
  });
});

test.after(async () => {
  await s?.svc.stop();
  await s?.fake.close();
});

test('deleting a running sync logs no warning and no error', async () => {
  // The decoder has streamed, the feed is being read: the sync is fully running.
  await waitFor('the decoder streaming', async () => (s.svc.logs.lines.some((l) => l.includes('"part":"decoder"')) ? true : undefined), 20_000);
  const from = s.svc.logs.lines.length;
  const deleted = await request(s.svc.api, 'DELETE', `/api/syncs/${s.syncId}`, { token: s.account.token });
  assert.ok(deleted.status === 200 || deleted.status === 204, deleted.text);
  await waitFor('the delete logged', async () => (s.svc.logs.lines.slice(from).some((l) => l.includes('"msg":"sync deleted"')) ? true : undefined), 20_000);
  // Long enough for a decoder or a runner still going to fail and say so (their retries are ~1 s).
  await pause(4_000);
  const loud = s.svc.logs.lines.slice(from).filter((l) => /"level":(40|50|60)/.test(l));
  assert.equal(loud, []);
});

test.run();
