/**
 * A fake upstream in its own process (see fake-process.ts), rate limits on:
 *   airtable <token> <records> <seed>   one generated base
 *   stripe <key>                        one empty account the key reads
 * Prints `{url, id}` (the base or the account), then answers each `stats` line on stdin with
 * that base's or account's request counts.
 */
import { createInterface } from 'node:readline';
import { startFakeAirtable } from '../../fakes/airtable/index.ts';
import { startFakeStripe } from '../../fakes/stripe/index.ts';

const [kind, secret, records, seed] = process.argv.slice(2) as [string, string, string, string];
let stats: () => { requests: number; rateLimited: number };
let close: () => Promise<void>;
if (kind === 'airtable') {
  const fake = await startFakeAirtable({ port: 0 });
  fake.addToken(secret, { bases: '*' });
  const base = fake.createBase({ name: 'Busy base' });
  base.generate({ seed: Number(seed), tables: [{ name: 'Big', records: Number(records) }] });
  stats = () => fake.stats.byBase(base.id);
  close = () => fake.close();
  process.stdout.write(`${JSON.stringify({ url: fake.url, id: base.id })}\n`);
} else {
  const fake = await startFakeStripe({ port: 0 });
  const account = fake.createAccount();
  fake.addKey(secret, { account: account.id });
  stats = () => fake.stats.byAccount(account.id);
  close = () => fake.close();
  process.stdout.write(`${JSON.stringify({ url: fake.url, id: account.id })}\n`);
}
createInterface({ input: process.stdin }).on('line', (line) => {
  if (line.trim() === 'stats') process.stdout.write(`${JSON.stringify(stats())}\n`);
});
process.stdin.on('end', () => void close().then(() => process.exit(0)));
