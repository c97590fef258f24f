/**
 * `tributary syncs watch` against real syncs of the harness's fake Stripe, run by the service's
 * sync role: the first pass as progress lines, then exit 0; a red sync's reason and exit 1;
 * Ctrl-C with 130. Requests to the fake are slowed so the pass lasts a few seconds.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { FakeStripeAccount } from '../fakes/stripe/index.ts';
import { completeLine, progressLine, readProgress } from '../src/cli/watch.ts';
import { spawnTributary, waitFor } from './harness/process.ts';
import { createAccount, loudSetUp, request, startTestService, type TestAccount, type TestService } from './harness/service.ts';

let svc: TestService;
let account: TestAccount;
test.before(
  loudSetUp(
    async () => {
      svc = await startTestService({ config: { roles: ['api', 'sync'] }, tunables: { workerTickMs: 250 } });
      account = await createAccount(svc, 'watch-co');
    },
    () => svc,
  ),
);
test.after(async () => svc?.stop());

/** A Stripe account upstream with some data, every request to it slowed by `delayMs`, and a sync of it. */
async function slowStripeSync(key: string, delayMs: number): Promise<{ syncId: string; upstream: FakeStripeAccount }> {
  const upstream = svc.stripe!.createAccount();
  upstream.generate({ seed: 7, customers: 20 });
  svc.stripe!.addKey(key, { account: upstream.id });
  svc.stripe!.faults.add({ match: { account: upstream.id }, kind: 'delay', delayMs, times: Infinity });
  const created = await request(svc.api, 'POST', '/api/syncs', { token: account.token, body: { kind: 'stripe', api_key: key } });
  assert.is(created.status, 201, created.text);
  return { syncId: created.body.id, upstream };
}

const watch = (syncId: string) => spawnTributary(['syncs', 'watch', syncId, '--interval', '0.2'], { TRIBUTARY_URL: svc.api, TRIBUTARY_TOKEN: account.token });

async function exited(proc: ReturnType<typeof watch>, ms = 120_000): Promise<number | string> {
  const timeout = new Promise<string>((resolve) => setTimeout(() => resolve(`still running after ${ms} ms`), ms).unref());
  const code = await Promise.race([proc.exited, timeout]);
  if (typeof code === 'string') proc.child.kill('SIGKILL');
  return code;
}

test('watch prints the first pass as progress lines, only when the figures change, and exits 0 at 100%', async () => {
  const { syncId } = await slowStripeSync('sk_test_watchProgress0000000', 300);
  const proc = watch(syncId);
  const code = await exited(proc);
  const lines = proc.output().trimEnd().split('\n');
  assert.is(code, 0, proc.output());
  assert.not.match(proc.output(), /\r|\x1b/, 'a log gets plain lines, no redraws or colours');
  // Each line differs from the one before: nothing is printed while the figures stand still.
  for (const [i, line] of lines.entries()) assert.is.not(line, lines[i - 1], `line ${i} repeats`);
  const under = lines.filter((line) => /^\[[#-]{20}\] +\d+% {2}backfill {2}lists \d+\/\d+ {2}objects \d/.test(line));
  assert.ok(under.length > 0, `progress was shown while the backfill ran:\n${proc.output()}`);
  const total = /lists \d+\/(\d+)/.exec(under[0]!)![1];
  assert.is(lines.at(-1), `[####################] 100%  lists ${total}/${total}  first pass complete`);
  const view = await request(svc.api, 'GET', `/api/syncs/${syncId}`, { token: account.token });
  assert.ok(view.body.status.completed_at, 'the API agrees: the first pass is complete');
  assert.is(view.body.status.indicator, 'normal');
});

test('watch exits 1 with the reason when the sync turns red', async () => {
  const key = 'sk_test_watchRevoked00000000';
  const { syncId } = await slowStripeSync(key, 300);
  // The key is revoked before the backfill reads with it: the sync stops at once (red).
  svc.stripe!.revokeKey(key);
  const proc = watch(syncId);
  const code = await exited(proc);
  assert.is(code, 1, proc.output());
  assert.match(proc.output(), new RegExp(`tributary syncs watch: sync ${syncId} is red: stopped: .+\\n$`));
});

test('Ctrl-C ends a watch with 130', async () => {
  const { syncId } = await slowStripeSync('sk_test_watchInterrupt000000', 2_000);
  const proc = watch(syncId);
  await waitFor('a first line', async () => (proc.output().includes('\n') ? true : undefined), 30_000);
  proc.child.kill('SIGINT');
  assert.is(await exited(proc, 10_000), 130, proc.output());
  assert.not.match(proc.output(), /first pass complete|tributary syncs watch:/, 'no error printed for an interrupt');
});

test('progress is read without knowing the kind: an Airtable sweep reads as tables and records', () => {
  // The shape src/airtable/runner.ts writes; the e2e tests above cover Stripe's backfill.
  const progress = readProgress({ phase: 'sweep', table: 'Contacts', tables_done: 1, tables_total: 4, records: 12_345 });
  assert.is(progressLine(progress), '[#####---------------]  25%  sweep  Contacts  tables 1/4  records 12,345');
  assert.is(completeLine(progress.steps), '[####################] 100%  tables 4/4  first pass complete');
  assert.is(progressLine(readProgress(null)), '...  waiting for the first pass to report progress');
  assert.is(progressLine(readProgress(null), '/'), '/  waiting for the first pass to report progress');
});

test.run();
