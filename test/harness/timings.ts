/**
 * Loaded into each test file's process by `test/run.ts` when TEST_TIMINGS is set: appends
 * how long the file's set-up, each test and its tear-down took to the file TEST_TIMINGS names
 * (one `seconds<TAB>file<TAB>what` line each), to find where a slow file spends its time.
 */
import { appendFileSync } from 'node:fs';

const out = process.env.TEST_TIMINGS;
const file = process.env.TEST_TIMINGS_NAME ?? '?';
if (out) {
  // As uvu/run does before it loads uvu: the file's suite then runs once, when the runner says.
  (globalThis as { UVU_DEFER?: number }).UVU_DEFER = 1;
  const { test } = await import('uvu');
  let mark = Date.now();
  let setUpDone = false;
  const record = (what: string) => {
    const now = Date.now();
    appendFileSync(out, `${((now - mark) / 1000).toFixed(2)}\t${file}\t${what}\n`);
    mark = now;
  };
  test.before(() => {
    mark = Date.now();
  });
  test.before.each(() => {
    if (!setUpDone) record('(set-up)');
    setUpDone = true;
    mark = Date.now();
  });
  test.after.each((state) => record(String((state as { __test__?: string }).__test__)));
  test.after(() => {
    mark = Date.now();
    process.once('beforeExit', () => record('(tear-down)'));
  });
}
