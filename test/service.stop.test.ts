/**
 * Service.stop() may be called more than once (a second signal, a caller's own cleanup after a
 * failed test): every call waits for the one shutdown, which closes each part once, newest first.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { request, startTestService } from './harness/service.ts';

test('stop() called twice at once, and again after, shuts down once and resolves every time', async () => {
  const svc = await startTestService();
  let stopped = false;
  try {
    const health = await request(svc.api, 'GET', '/healthz');
    assert.is(health.status, 200);
    const outcomes = await Promise.allSettled([svc.service.stop(), svc.service.stop()]);
    assert.equal(
      outcomes.map((o) => (o.status === 'rejected' ? String((o.reason as Error).message) : o.status)),
      ['fulfilled', 'fulfilled'],
    );
    await svc.service.stop();
    stopped = true;
    const after = await fetch(`${svc.api}/healthz`).then(
      (r) => r.status,
      () => 'refused',
    );
    assert.is(after, 'refused', 'the API port is closed');
    assert.not.ok(
      svc.logs.lines.some((l) => /"level":50/.test(l)),
      'no error logged while stopping',
    );
  } finally {
    if (!stopped) await svc.service.stop().catch(() => undefined);
    await svc.airtable.close();
    await svc.stripe?.close();
  }
});

test.run();
