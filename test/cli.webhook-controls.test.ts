/**
 * `tributary webhooks create` with a filter, a rate and --backfill, then `update`,
 * `rotate-secret` and `recover`, against the whole service (api, sync, decoder, events) and an
 * Airtable sync of the fake, with a real HTTP receiver. Signatures are checked with a verifier
 * written here from the Standard Webhooks spec, not with the product's signer.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawnTributary, waitFor } from './harness/process.ts';
import { verifies } from './harness/standard-webhooks.ts';
import { createAccount, createAirtableSync, loudSetUp, request, startTestService, type TestAccount, type TestService } from './harness/service.ts';

const BASE = 'appAAAAAAAAAAAAAA';

let svc: TestService | undefined;
let account: TestAccount;
let syncId: string;
let receiver: http.Server;
let receiverUrl: string;

interface Delivery {
  id: string;
  timestamp: string;
  signature: string;
  body: string;
  event: { event: string; id: string; data: Record<string, unknown> };
}
const received: Delivery[] = [];

test.before(
  loudSetUp(
    async () => {
      svc = await startTestService({
        config: { roles: ['api', 'sync', 'decoder', 'events'], webhookAllowPrivate: true },
        tunables: { airtable: { pollIntervalMs: 200, cycleGapMs: 200 }, workerTickMs: 200 },
      });
      account = await createAccount(svc, 'controls-co');
      const base = svc.airtable.base(BASE);
      base.createTable('Tasks', [
        { name: 'Name', type: 'singleLineText' },
        { name: 'Status', type: 'singleLineText' },
        { name: 'Points', type: 'number', options: { precision: 0 } },
      ]);
      base.createRecords('Tasks', [
        { Name: 'Plan', Status: 'open', Points: 1 },
        { Name: 'Build', Status: 'open', Points: 2 },
        { Name: 'Test', Status: 'blocked', Points: 3 },
        { Name: 'Ship', Status: 'done', Points: 5 },
        { Name: 'Party', Status: 'done' },
      ]);
      const sync = await createAirtableSync(svc, account, BASE);
      syncId = sync.id;
      receiver = http.createServer((req, res) => {
        let body = '';
        req.on('data', (chunk: Buffer) => (body += chunk.toString()));
        req.on('end', () => {
          const header = (name: string) => String(req.headers[name]);
          received.push({
            id: header('webhook-id'),
            timestamp: header('webhook-timestamp'),
            signature: header('webhook-signature'),
            body,
            event: JSON.parse(body),
          });
          res.writeHead(204).end();
        });
      });
      await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
      receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks`;
    },
    () => svc,
  ),
);

test.after(async () => {
  receiver?.close();
  await svc?.stop();
});

const api = (method: string, route: string, body?: unknown) => request(svc!.api, method, route, { token: account.token, body });

async function cli(args: string[]) {
  const proc = spawnTributary(args, { TRIBUTARY_URL: svc!.api, TRIBUTARY_TOKEN: account.token });
  let stdout = '';
  let stderr = '';
  proc.child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  proc.child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const code = await proc.exited;
  return { code, stdout, stderr, output: `${stdout}${stderr}` };
}

/** Changes a task upstream and waits until its event is in the event log. */
async function changeTask(name: string, fields: Record<string, unknown>): Promise<string> {
  const base = svc!.airtable.base(BASE);
  const task = base.records('Tasks').find((r) => r.fields.Name === name)!;
  base.updateRecord('Tasks', task.id, fields);
  const waited = await api('GET', `/api/wait/${syncId}?timeout=30000`);
  assert.is(waited.body.ok, true, waited.text);
  return task.id;
}

const arrived = (predicate: (d: Delivery) => boolean, what: string) => waitFor(what, async () => received.find(predicate), 20_000);

let hook: { id: string; secret: string };

test('create with a filter, a rate and --backfill: only the matching rows are read to it', async () => {
  const bad = await cli(['webhooks', 'create', syncId, receiverUrl, '--topic', 'tasks', '--filter-events', 'inserted,created']);
  assert.is(bad.code, 2, bad.output);
  assert.match(
    bad.stderr,
    /^tributary webhooks create: --filter-events takes kinds from inserted, updated, deleted, read, comma-separated \(not created\) \(tributary webhooks create --help\)\n$/,
  );
  const typo = await cli(['webhooks', 'create', syncId, receiverUrl, '--topic', 'tasks', '--where', 'stauts=open']);
  assert.is(typo.code, 1, typo.output);
  assert.is(typo.stderr, `tributary webhooks create: 400 invalid_request: filter: column "stauts" is in none of the webhook's collections (tasks)\n`);

  const args = ['--filter-events', 'read,updated', '--changed', 'points', '--where-in', 'status=open,blocked', '--where', 'points!=null'];
  const created = await cli(['webhooks', 'create', syncId, receiverUrl, '--topic', 'tasks', ...args, '--max-per-second', '50', '--backfill']);
  assert.is(created.code, 0, created.output);
  const answer = JSON.parse(created.stdout);
  assert.equal(answer.filter, { events: ['updated', 'read'], changed: ['points'], where: { status: { in: ['open', 'blocked'] }, points: { not_null: true } } });
  assert.equal([answer.max_per_second, answer.state, answer.backfill.webhook], [50, 'enabled', answer.id]);
  hook = { id: answer.id, secret: answer.secret };

  const backfill = await waitFor(
    'the backfill done',
    async () => {
      const view = (await api('GET', `/api/syncs/${syncId}/backfills/${answer.backfill.id}`)).body;
      return view.state === 'done' ? view : undefined;
    },
    30_000,
  );
  assert.is(backfill.rows, 5, 'every row read');
  await waitFor('three reads delivered', async () => (received.length >= 3 ? true : undefined), 20_000);
  await new Promise((resolve) => setTimeout(resolve, 500));
  // Plan, Build (open) and Test (blocked) pass; the done ones are skipped.
  assert.equal(received.map((d) => [d.event.event, d.event.data.name]).sort(), [
    ['read', 'Build'],
    ['read', 'Plan'],
    ['read', 'Test'],
  ]);
  for (const delivery of received) assert.ok(verifies(hook.secret, delivery), 'signed with the secret printed');
});

test('update --disable: nothing is sent, list says why; --enable resumes with what was missed', async () => {
  received.length = 0;
  const disabled = await cli(['webhooks', 'update', syncId, hook.id, '--disable']);
  assert.is(disabled.code, 0, disabled.output);
  const view = JSON.parse(disabled.stdout);
  assert.equal([view.state, view.disabled_reason], ['disabled', 'disabled by request']);
  const list = await cli(['webhooks', 'list', syncId]);
  assert.match(list.stdout, new RegExp(`${hook.id} .* disabled: disabled by request \\(just now\\) `));

  await changeTask('Plan', { Points: 8 });
  await new Promise((resolve) => setTimeout(resolve, 1500));
  assert.equal(received, [], 'nothing is sent to a disabled webhook');

  const conflicting = await cli(['webhooks', 'update', syncId, hook.id, '--enable', '--disable']);
  assert.is(conflicting.code, 2);
  assert.match(conflicting.stderr, /--enable and --disable go apart/);
  const enabled = await cli(['webhooks', 'update', syncId, hook.id, '--enable']);
  assert.is(enabled.code, 0, enabled.output);
  assert.equal([JSON.parse(enabled.stdout).state, JSON.parse(enabled.stdout).disabled_reason], ['enabled', null]);
  const missed = await arrived((d) => d.event.event === 'updated' && d.event.data.name === 'Plan', 'the update made while disabled');
  assert.is(missed.event.data.points, 8);
  assert.match((await cli(['webhooks', 'list', syncId])).stdout, new RegExp(`${hook.id} .* enabled `));

  // The filter and rate change too; --no-filter and a filter together are a usage error.
  const both = await cli(['webhooks', 'update', syncId, hook.id, '--no-filter', '--changed', 'name']);
  assert.is(both.code, 2);
  const rate = await cli(['webhooks', 'update', syncId, hook.id, '--no-max-per-second', '--filter-events', 'updated', '--where', 'status=open']);
  assert.is(rate.code, 0, rate.output);
  assert.equal([JSON.parse(rate.stdout).filter, JSON.parse(rate.stdout).max_per_second], [{ events: ['updated'], where: { status: 'open' } }, null]);
});

test('rotate-secret: printed once; the new secret verifies deliveries, the old one only while kept', async () => {
  const kept = await cli(['webhooks', 'rotate-secret', syncId, hook.id, '--keep-previous', '1h']);
  assert.is(kept.code, 0, kept.output);
  const first = JSON.parse(kept.stdout);
  assert.match(first.secret, /^whsec_/);
  const expires = Date.parse(first.previous_expires_at) - Date.now();
  assert.ok(expires > 3_500_000 && expires <= 3_600_000, `the old secret is kept an hour (${expires} ms)`);
  assert.match(kept.stderr, /^The new secret is shown only this once; the old secret also signs until /);
  const shown = await cli(['webhooks', 'show', syncId, hook.id]);
  assert.not.ok(shown.stdout.includes(first.secret), 'never shown again');
  assert.is(JSON.parse(shown.stdout).previous_secret_expires_at, first.previous_expires_at);

  received.length = 0;
  await changeTask('Build', { Points: 13 });
  const both = await arrived((d) => d.event.data.name === 'Build', 'a delivery signed twice');
  assert.is(both.signature.split(' ').length, 2);
  assert.ok(verifies(first.secret, both), 'the new secret verifies');
  assert.ok(verifies(hook.secret, both), 'the old one too, while kept');

  const dropped = await cli(['webhooks', 'rotate-secret', syncId, hook.id, '--keep-previous', '0']);
  assert.is(dropped.code, 0, dropped.output);
  const second = JSON.parse(dropped.stdout);
  assert.is(second.previous_expires_at, null);
  assert.match(dropped.stderr, /the old secret no longer signs/);
  received.length = 0;
  await changeTask('Build', { Points: 21 });
  const single = await arrived((d) => d.event.data.points === 21, 'a delivery signed once');
  assert.ok(verifies(second.secret, single), 'the newest secret verifies');
  assert.not.ok(verifies(first.secret, single), 'the one dropped does not');
  assert.not.ok(verifies(hook.secret, single));
  hook.secret = second.secret;

  const bad = await cli(['webhooks', 'rotate-secret', syncId, hook.id, '--keep-previous', 'a week']);
  assert.is(bad.code, 2, bad.output);
  const tooLong = await cli(['webhooks', 'rotate-secret', syncId, hook.id, '--keep-previous', '8d']);
  assert.is(tooLong.code, 1, tooLong.output);
  assert.match(tooLong.stderr, /^tributary webhooks rotate-secret: 400 invalid_request: .*previous_expires_in.*604800/);
});

test('recover: a --since the API refuses is its 422 message, exit 1; a good one sends the events again', async () => {
  const future = new Date(Date.now() + 3_600_000).toISOString();
  const ahead = await cli(['webhooks', 'recover', syncId, hook.id, '--since', future]);
  assert.is(ahead.code, 1, ahead.output);
  assert.is(ahead.stdout, '');
  assert.match(ahead.stderr, /^tributary webhooks recover: 422 unprocessable: since: \S+ is in the future\n$/);
  const old = await cli(['webhooks', 'recover', syncId, hook.id, '--since', '30d']);
  assert.is(old.code, 1, old.output);
  assert.match(
    old.stderr,
    /^tributary webhooks recover: 422 unprocessable: since: \S+ is older than the event log keeps events \(168 hours\); the earliest is \S+\n$/,
  );
  const missing = await cli(['webhooks', 'recover', syncId, hook.id]);
  assert.is(missing.code, 2);

  // Every update to Build so far, again: the filter (updated, status open) still applies.
  const before = received.length;
  const recovered = await cli(['webhooks', 'recover', syncId, hook.id, '--since', '1h']);
  assert.is(recovered.code, 0, recovered.output);
  const answer = JSON.parse(recovered.stdout);
  assert.equal([answer.id, answer.state], [hook.id, 'enabled']);
  assert.ok(Math.abs(Date.parse(answer.since) - (Date.now() - 3_600_000)) < 60_000, `since is an hour ago: ${answer.since}`);
  await waitFor(
    'the updates sent again',
    async () => {
      const again = received
        .slice(before)
        .filter((d) => d.event.data.name === 'Build')
        .map((d) => d.event.data.points);
      return again.includes(13) && again.includes(21) ? true : undefined;
    },
    20_000,
  );
  for (const delivery of received.slice(before)) {
    assert.ok(verifies(hook.secret, delivery), 'signed with the current secret');
    assert.is(delivery.event.data.status, 'open', 'the filter still holds');
  }
});

test.run();
