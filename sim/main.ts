/**
 * `npm run simulate -- --minutes N --seed S [--upstream stripe|airtable] [--no-kafka] [--no-pings]`: the
 * whole service under simulated account traffic and injected faults, invariants checked, a
 * summary printed. Exits 1 when any invariant was violated (the seed reproduces the run).
 * `--ci`: the CI profile (test/simulation.test.ts). `--first K,K`: these fault kinds strike
 * first, in that order; `--only K,K`: only these strike (to tell which one a failure needs). `--seeds N`: N seeds in turn (from --seed, else random), the logs of
 * those that fail kept under sim-runs/ (sim/seeds.ts).
 */
import { parseArgs } from 'node:util';
import { createLogger, logProcessWarnings } from '../src/log.ts';
import { FAULT_KINDS, type FaultKind } from './faults.ts';
import { CI_PROFILE, simulate } from './run.ts';
import { runSeeds } from './seeds.ts';
import { summarize } from './summary.ts';

const USAGE =
  'usage: npm run simulate -- [--minutes N | --ci] [--seed S] [--seeds N] [--first KIND,KIND] [--only KIND,KIND] [--upstream stripe|airtable] [--no-kafka] [--no-pings]';

async function main(): Promise<number> {
  // The Kafka check's kafkajs client draws the same harmless Node warning as the service's.
  logProcessWarnings(createLogger({ level: 'warn', destination: process.stderr }));
  let values;
  try {
    ({ values } = parseArgs({
      options: {
        minutes: { type: 'string', default: '5' },
        seed: { type: 'string' },
        seeds: { type: 'string' },
        ci: { type: 'boolean', default: false },
        first: { type: 'string' },
        only: { type: 'string' },
        upstream: { type: 'string' },
        'no-kafka': { type: 'boolean', default: false },
        'no-pings': { type: 'boolean', default: false },
        help: { type: 'boolean', default: false },
      },
      strict: true,
    }));
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n${USAGE}\n`);
    return 2;
  }
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const minutes = values.ci ? CI_PROFILE.minutes : Number(values.minutes);
  const seed = values.seed === undefined ? Math.floor(Math.random() * 2 ** 31) : Number(values.seed);
  const seeds = values.seeds === undefined ? undefined : Number(values.seeds);
  if (!(minutes > 0) || !Number.isInteger(seed) || seed < 0 || (seeds !== undefined && !(Number.isInteger(seeds) && seeds >= 1))) {
    process.stderr.write(`--minutes must be a positive number, --seed a whole number ≥ 0 and --seeds one ≥ 1\n${USAGE}\n`);
    return 2;
  }
  const first = values.first === undefined ? [] : values.first.split(',');
  const only = values.only === undefined ? [] : values.only.split(',');
  const unknown = [...first, ...only].filter((k) => !(FAULT_KINDS as readonly string[]).includes(k));
  if (unknown.length > 0) {
    process.stderr.write(
      `--first and --only name fault kinds: ${unknown.join(', ')} ${unknown.length === 1 ? 'is' : 'are'} not one (${FAULT_KINDS.join(', ')})\n${USAGE}\n`,
    );
    return 2;
  }
  if (values.upstream !== undefined && values.upstream !== 'stripe' && values.upstream !== 'airtable') {
    process.stderr.write(`--upstream must be stripe or airtable\n${USAGE}\n`);
    return 2;
  }
  const started = Date.now();
  if (seeds !== undefined) {
    const passOn = process.argv.slice(2).filter((a, i, all) => !['--seeds', '--seed'].includes(a) && !['--seeds', '--seed'].includes(all[i - 1] ?? ''));
    const list = Array.from({ length: seeds }, (_, i) => seed + i);
    const runs = await runSeeds(list, passOn, 'sim-runs', (line) => process.stderr.write(`${line}\n`));
    const failed = runs.filter((r) => !r.ok);
    process.stdout.write(`${runs.length - failed.length} passed, ${failed.length} failed\n`);
    for (const r of failed)
      process.stdout.write(`seed ${r.seed} failed; replay: npm run simulate -- ${[...passOn, '--seed', String(r.seed)].join(' ')}\n${r.why}\n`);
    return failed.length === 0 ? 0 : 1;
  }
  const log = (line: string) => process.stderr.write(`[${((Date.now() - started) / 1000).toFixed(0).padStart(5)} s] ${line}\n`);
  const report = await simulate({
    seed,
    minutes,
    upstreams: values.upstream ? [values.upstream as 'stripe' | 'airtable'] : ['stripe', 'airtable'],
    kafka: !values['no-kafka'],
    pings: !values['no-pings'],
    // The long faults (a webhook receiver down for minutes) at full length in a soak only.
    faultScale: values.ci ? CI_PROFILE.faultScale : Math.min(1, minutes / 30),
    ...(values.ci ? { quietMinutes: CI_PROFILE.quietMinutes, faults: CI_PROFILE.faults } : {}),
    ...(first.length > 0 ? { first: first as FaultKind[] } : {}),
    ...(only.length > 0 ? { faults: only as FaultKind[] } : {}),
    log,
  });
  process.stdout.write(summarize(report));
  return report.violations.length === 0 ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`simulation failed: ${(error as Error).stack ?? String(error)}\n`);
    process.exit(1);
  },
);
