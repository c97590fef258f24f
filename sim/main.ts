/**
 * `npm run simulate -- --minutes N --seed S [--upstream stripe|airtable] [--no-kafka] [--no-pings]`: the
 * whole service under simulated account traffic and injected faults, invariants checked, a
 * summary printed. Exits 1 when any invariant was violated (the seed reproduces the run).
 */
import { parseArgs } from 'node:util';
import { createLogger, logProcessWarnings } from '../src/log.ts';
import { simulate } from './run.ts';
import { summarize } from './summary.ts';

const USAGE = 'usage: npm run simulate -- --minutes N --seed S [--upstream stripe|airtable] [--no-kafka] [--no-pings]';

async function main(): Promise<number> {
  // The Kafka check's kafkajs client draws the same harmless Node warning as the service's.
  logProcessWarnings(createLogger({ level: 'warn', destination: process.stderr }));
  let values;
  try {
    ({ values } = parseArgs({
      options: {
        minutes: { type: 'string', default: '5' },
        seed: { type: 'string' },
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
  const minutes = Number(values.minutes);
  const seed = values.seed === undefined ? Math.floor(Math.random() * 2 ** 31) : Number(values.seed);
  if (!(minutes > 0) || !Number.isInteger(seed) || seed < 0) {
    process.stderr.write(`--minutes must be a positive number and --seed a whole number ≥ 0\n${USAGE}\n`);
    return 2;
  }
  if (values.upstream !== undefined && values.upstream !== 'stripe' && values.upstream !== 'airtable') {
    process.stderr.write(`--upstream must be stripe or airtable\n${USAGE}\n`);
    return 2;
  }
  const started = Date.now();
  const log = (line: string) => process.stderr.write(`[${((Date.now() - started) / 1000).toFixed(0).padStart(5)} s] ${line}\n`);
  const report = await simulate({
    seed,
    minutes,
    upstreams: values.upstream ? [values.upstream as 'stripe' | 'airtable'] : ['stripe', 'airtable'],
    kafka: !values['no-kafka'],
    pings: !values['no-pings'],
    // The long faults (a webhook receiver down for minutes) at full length in a soak only.
    faultScale: Math.min(1, minutes / 30),
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
