/**
 * @platformatic/kafka is used only to manage SCRAM users on a Kafka cluster, and its entry
 * point loads its whole client: about 55 MB of resident memory on Node 24, a third of an idle
 * service's. Every process would pay that at start, Kafka or not, so it is loaded on first use.
 * Here the service's and the CLI's module graphs are loaded in a child process whose resolve
 * hook records every package asked for.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { repoRoot } from './harness/process.ts';

const run = promisify(execFile);

const PROBE = `
import { registerHooks } from 'node:module';
const asked = new Set();
registerHooks({
  resolve(specifier, context, next) {
    if (!specifier.startsWith('.') && !specifier.startsWith('node:') && !specifier.startsWith('file:')) asked.add(specifier);
    return next(specifier, context);
  },
});
await import('./src/main.ts');
await import('./src/cli/main.ts');
process.stdout.write(JSON.stringify([...asked]));
`;

test('loading the service and the CLI leaves @platformatic/kafka unloaded', async () => {
  const { stdout } = await run(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', PROBE], { cwd: repoRoot });
  const asked: string[] = JSON.parse(stdout);
  // The probe sees the packages the service does load, or it proves nothing.
  assert.ok(asked.includes('pg') && asked.includes('kafkajs'), `packages asked for: ${asked.join(', ')}`);
  assert.equal(
    asked.filter((name) => name.startsWith('@platformatic/kafka')),
    [],
  );
});

test.run();
