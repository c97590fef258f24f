/**
 * The disk-full part of the status rule, over generated statuses: a latest attempt that failed
 * because the sync database's server is out of disk space (`disk_full`) is red at once with
 * its own reason, and it decides over a lagging event log; once a cycle completes after it,
 * the sync is normal again. A transient failure of the same age stays yellow. Before, a full
 * disk was an ordinary transient failure: yellow, "trouble syncing", for five minutes.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { statusOf } from '../src/control/status.ts';
import { ago, healthyStatus, NOW } from './harness/status-fields.ts';

const MESSAGE = 'could not extend file "base/16384/16823": No space left on device';

test('disk_full is red at once with its reason until a cycle completes after it', () => {
  let x = 17;
  const next = () => {
    x = (x * 1103515245 + 12345) % 2 ** 31;
    return x / 2 ** 31;
  };
  for (let i = 0; i < 2000; i++) {
    const errorAgo = Math.floor(next() * 600_000);
    const completedAgo = Math.floor(next() * 600_000);
    const kind = next() < 0.5 ? ('disk_full' as const) : ('transient' as const);
    const eventsBehind = next() < 0.3;
    const status = healthyStatus({
      startedAt: ago(Math.max(errorAgo, completedAgo) + 1000),
      completedAt: ago(completedAgo),
      lastError: MESSAGE,
      lastErrorAt: ago(errorAgo),
      lastErrorKind: kind,
      ...(eventsBehind ? { events: { reportedAt: ago(1000), slotLagBytes: 50 * 1024 * 1024, loggedThrough: ago(400_000) } } : {}),
    });
    const view = statusOf(status, NOW);
    const failing = errorAgo < completedAgo;
    const label = JSON.stringify({ errorAgo, completedAgo, kind, eventsBehind, view });
    if (failing && kind === 'disk_full') {
      assert.is(view.indicator, 'red', label);
      assert.is(
        view.reason,
        `the sync database's server is out of disk space (${MESSAGE}): nothing can be written until space is freed; the sync tries again and catches up by itself`,
        label,
      );
    } else if (!failing && !eventsBehind) {
      assert.is(view.indicator, 'normal', label);
    } else if (failing && kind === 'transient' && !eventsBehind) {
      // Failing since the last completed cycle: yellow for five minutes, red after.
      assert.is(view.indicator, completedAgo < 300_000 ? 'yellow' : 'red', label);
    }
  }
});

test.run();
