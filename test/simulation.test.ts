/**
 * The traffic simulation's CI profile: the service as a fleet of split roles behind load
 * balancers, over sync servers in two regions; both upstreams driven the way real accounts
 * are (billing, several UI users, proxied and direct client writes), every kind of fault
 * struck once (the SIGKILL on a worker), then every invariant checked (sim/run.ts). A new
 * seed each run (SIM_SEED picks one), printed first with the command that replays it:
 * `npm run simulate -- --ci --seed <seed>`, or `SIM_SEED=<seed> npm run test:sim`.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { CI_FAULT_KINDS } from '../sim/faults.ts';
import { CI_PROFILE, simulate } from '../sim/run.ts';
import { summarize } from '../sim/summary.ts';
import { note } from './harness/note.ts';

const SEED = process.env.SIM_SEED ? Number(process.env.SIM_SEED) : Math.floor(Math.random() * 1_000_000);
note(`simulation seed ${SEED}; replay: npm run simulate -- --ci --seed ${SEED}  (or SIM_SEED=${SEED} npm run test:sim)`);

test(`the CI profile (seed ${SEED}): no invariant is violated under traffic and faults`, async () => {
  const started = Date.now();
  const report = await simulate({
    seed: SEED,
    // Two minutes, short faults; quietMinutes so that it reports (rather than being killed by the
    // test runner) when a sync does not catch up.
    ...CI_PROFILE,
    upstreams: ['stripe', 'airtable'],
    kafka: true,
    log: (line) => process.stdout.write(`[sim ${((Date.now() - started) / 1000).toFixed(0)} s] ${line}\n`),
  });
  const summary = summarize(report);
  process.stdout.write(summary);
  note(`every sync caught up ${(report.convergence.ms / 1000).toFixed(0)} s after the last fault (bound ${report.convergence.boundMs / 1000} s)`);
  assert.equal(report.violations, [], summary);
  // The run did what it claims: traffic of every actor, every fault, every check.
  assert.equal(new Set(report.faults.map((f) => f.kind)), new Set(CI_FAULT_KINDS), 'every kind of fault of the CI profile struck');
  const done = (kind: string) => report.operations.get(kind)?.done ?? 0;
  assert.ok(done('proxy.create') > 0 && done('proxy.update') > 0 && done('wait.ok') > 0, summary);
  assert.ok((report.checks.get('read-after-write') ?? 0) > 20, summary);
  // The fleet took the traffic: every process behind a balancer answered some, and a worker was killed.
  for (const name of ['api-1', 'api-2', 'proxy-1', 'proxy-2', 'events-1']) assert.ok((report.requests.get(name) ?? 0) > 0, `${name} took requests`);
  // Airtable's webhook pinged the service's public URL, and the pings checked out.
  assert.ok((report.requests.get('hooks 200') ?? 0) > 0, summary);
  assert.ok(
    report.faults.some((f) => /^service-sigkill \(worker-\d\)$/.test(f.name)),
    summary,
  );
  for (const name of ['db=upstream', 'events-fold (REST)', 'events-fold (webhooks)', 'events-fold (Kafka)', 'events (webhooks)', 'events (Kafka)'])
    assert.ok(report.checks.has(name), `${name} checked`);
});

test.run();
