/**
 * The fakes of bench/fleet.ts in a process of their own, so their CPU is not the service's:
 *   fleet-fakes.ts <airtable bases> <stripe accounts> <records per base>
 * Each base has three tables (Projects, Tasks, People) and its own user and token, so only the
 * per-base limit applies; each Stripe account is empty, read with a key of its own. Prints
 * `{airtable, stripe, bases: [{id, token}], keys: [key]}`, then answers each line on stdin:
 *   edit <n>     sets the Name of a record of base n's Projects  → {record, value, at}
 *   create <n>   creates a Projects record in base n             → {record, value, at}
 *   delete <n> <record>  deletes a record of base n's Projects   → {record, at}
 *   stats        → {requests, rateLimited} over both fakes
 */
import { createInterface } from 'node:readline';
import { startFakeAirtable } from '../fakes/airtable/index.ts';
import { startFakeStripe } from '../fakes/stripe/index.ts';

const [baseCount, accountCount, records] = process.argv.slice(2).map(Number) as [number, number, number];
const airtable = await startFakeAirtable({ port: 0 });
const stripe = await startFakeStripe({ port: 0 });
const hex = '0123456789abcdef'.repeat(4);
const bases = Array.from({ length: baseCount }, (_, i) => {
  const base = airtable.createBase({ name: `Fleet ${i + 1}` });
  const third = Math.round(records / 3);
  base.generate({
    seed: i + 1,
    tables: [
      { name: 'Projects', records: records - 2 * third },
      { name: 'Tasks', records: third },
      { name: 'People', records: third },
    ],
  });
  const token = `pat${String(i + 1).padStart(14, '0')}.${hex}`;
  airtable.addToken(token, { bases: [base.id], user: `usr${String(i + 1).padStart(14, '0')}` });
  return { id: base.id, token, base };
});
const keys = Array.from({ length: accountCount }, (_, i) => {
  const account = stripe.createAccount();
  const key = `sk_test_fleet${String(i + 1).padStart(16, '0')}`;
  stripe.addKey(key, { account: account.id });
  return key;
});

let serial = 0;
const commands: Record<string, (n: number, record?: string) => unknown> = {
  edit(n) {
    const { base } = bases[n]!;
    const rows = base.records('Projects');
    const record = rows[serial % rows.length]!.id;
    const value = `edit ${++serial}`;
    base.updateRecord('Projects', record, { Name: value });
    return { record, value, at: Date.now() };
  },
  create(n) {
    const value = `new ${++serial}`;
    const [made] = bases[n]!.base.createRecords('Projects', [{ Name: value }]);
    return { record: made!.id, value, at: Date.now() };
  },
  delete(n, record) {
    if (!record) return { error: 'delete needs a record id' };
    bases[n]!.base.deleteRecords('Projects', [record]);
    return { record, at: Date.now() };
  },
  stats: () => ({
    requests: airtable.stats.requests + stripe.stats.requests,
    rateLimited: airtable.stats.rateLimited + stripe.stats.rateLimited,
  }),
};

process.stdout.write(`${JSON.stringify({ airtable: airtable.url, stripe: stripe.url, bases: bases.map(({ id, token }) => ({ id, token })), keys })}\n`);
createInterface({ input: process.stdin }).on('line', (line) => {
  const [word, n, record] = line.trim().split(/\s+/);
  const command = commands[word ?? ''];
  process.stdout.write(`${JSON.stringify(command ? command(Number(n), record) : { error: `unknown command ${word}` })}\n`);
});
process.stdin.on('end', () => void Promise.all([airtable.close(), stripe.close()]).then(() => process.exit(0)));
