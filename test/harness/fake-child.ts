/**
 * A fake upstream in its own process (see fake-process.ts), rate limits on:
 *   airtable <token> <records> <seed>   one generated base
 *   airtable-user <token prefix> <records> <seed> <bases> <user id>
 *                                       that many bases of a small table, each read with a
 *                                       token of its own (the prefix and its number), all
 *                                       tokens the user's
 *   stripe <key> [customers] [seed]     one account the key reads, empty or generated
 * Prints `{url, id, first}` (the base or the account, and its first customer if any), then
 * answers each `stats [path prefix …]` line on stdin with that base's or account's request
 * counts, and the requests under each prefix given, and each `arrivals` line with every
 * request it has received: when (its own clock), its user agent, and its answer. Airtable
 * also takes `token <token> base|other`: a second token that reads the base, or one that
 * reads only some other base (a 403 here); it answers `ok`. airtable-user prints `bases` too
 * (`[{id, token}]`), counts requests over all of them, its `token` is another of the user's
 * (reading all of its bases), and it takes `edit <base id> <text>` (the
 * first record's Name set to the text, as in Airtable's UI; it answers `{record, at}`) and
 * `refusals` (the 429s it answered, with the requests before each).
 */
import diagnostics from 'node:diagnostics_channel';
import type { IncomingMessage, ServerResponse } from 'node:http';
import os from 'node:os';
import { createInterface } from 'node:readline';
import type { Arrival } from './fake-process.ts';
import { startFakeAirtable } from '../../fakes/airtable/index.ts';
import { startFakeStripe } from '../../fakes/stripe/index.ts';
import { ARRIVAL_HEADER } from '../../fakes/shared/arrival.ts';
import { startArrivalFront } from '../../sim/upstreams/arrival-front.ts';

// The upstream this plays runs on machines of its own, which the suite's load does not starve:
// ahead of the other files' processes, the fake (and the arrival front, a thread it starts
// later, which inherits this) reads requests when they come. Starved, the front stamped a
// limiter's well-spaced requests up to 60 ms late and together, and counted 21 of a share of
// 20 in a second the limiter's own log held 20 (quota.stripe-share, proxy.stripe-share).
// Without the privilege to raise it (not root), the fake runs as before.
try {
  os.setPriority(-15);
} catch {}

const [kind, secret, records, seed, baseCount, userId] = process.argv.slice(2) as [string, string, string, string, string?, string?];
const arrivals: Arrival[] = [];
diagnostics.subscribe('http.server.request.start', (message) => {
  const { request, response } = message as { request: IncomingMessage; response: ServerResponse };
  const arrival: Arrival = {
    // When the front took it in (a loop of its own), as the fake counts it.
    at: Number(request.headers[ARRIVAL_HEADER]) || Date.now(),
    method: request.method ?? '',
    path: (request.url ?? '').split('?')[0]!,
    agent: String(request.headers['user-agent'] ?? ''),
  };
  arrivals.push(arrival);
  response.once('finish', () => (arrival.status = response.statusCode));
});
let stats: () => { requests: number; rateLimited: number };
let addToken: (token: string, reads: string) => void = () => undefined;
let byPath: (prefix: string) => number;
let close: () => Promise<void>;
let edit: (baseId: string, text: string) => unknown = () => undefined;
let refusals: () => unknown = () => [];
/**
 * Each fake sits behind an arrival front (a worker thread that stamps when each request came):
 * with test files running beside it, the fake's own loop reads requests late and bunched, and
 * would count a limiter's well-spaced requests as a burst over the limit.
 */
const fronted = async (fake: { url: string; close(): Promise<void> }) => {
  const front = await startArrivalFront(fake.url);
  close = async () => {
    await front.close();
    await fake.close();
  };
  return front.url;
};
if (kind === 'airtable-user') {
  const fake = await startFakeAirtable({ port: 0, trustArrivalStamps: true });
  const bases = Array.from({ length: Number(baseCount) }, (_, i) => {
    const base = fake.createBase({ name: `Base ${i + 1}` });
    base.createTable('Items', [
      { name: 'Name', type: 'singleLineText' },
      { name: 'Count', type: 'number', options: { precision: 0 } },
    ]);
    base.createRecords(
      'Items',
      Array.from({ length: Number(records) }, (_, n) => ({ Name: `item ${n + 1}`, Count: n + 1 })),
    );
    const token = `${secret}${String(i + 1).padStart(3, '0')}`;
    fake.addToken(token, { bases: [base.id], user: userId });
    return { id: base.id, token, base };
  });
  stats = () => ({ requests: fake.stats.requests, rateLimited: fake.stats.rateLimited });
  byPath = () => 0;
  // Another token of the user: reading every base of the user, or only some other base.
  addToken = (token, reads) => fake.addToken(token, { bases: reads === 'base' ? bases.map((b) => b.id) : ['appOTHERBASE00000'], user: userId });
  edit = (baseId, text) => {
    const base = bases.find((b) => b.id === baseId)!.base;
    const record = base.records('Items')[0]!.id;
    base.updateRecord('Items', record, { Name: text });
    return { record, at: Date.now() };
  };
  refusals = () => fake.stats.refusals();
  process.stdout.write(`${JSON.stringify({ url: await fronted(fake), id: bases[0]!.id, bases: bases.map(({ id, token }) => ({ id, token })) })}\n`);
} else if (kind === 'airtable') {
  const fake = await startFakeAirtable({ port: 0, trustArrivalStamps: true });
  fake.addToken(secret, { bases: '*' });
  const base = fake.createBase({ name: 'Busy base' });
  base.generate({ seed: Number(seed), tables: [{ name: 'Big', records: Number(records) }] });
  stats = () => fake.stats.byBase(base.id);
  byPath = () => 0;
  addToken = (token, reads) => fake.addToken(token, { bases: reads === 'base' ? [base.id] : ['appOTHERBASE00000'] });
  process.stdout.write(`${JSON.stringify({ url: await fronted(fake), id: base.id })}\n`);
} else {
  const fake = await startFakeStripe({ port: 0, trustArrivalStamps: true });
  const account = fake.createAccount();
  if (Number(records) > 0) account.generate({ seed: Number(seed ?? 1), customers: Number(records) });
  fake.addKey(secret, { account: account.id });
  stats = () => fake.stats.byAccount(account.id);
  byPath = (prefix) => fake.stats.byPath(prefix).requests;
  const first = Number(records) > 0 ? account.all('customers')[0]?.id : undefined;
  process.stdout.write(`${JSON.stringify({ url: await fronted(fake), id: account.id, first })}\n`);
}
createInterface({ input: process.stdin }).on('line', (line) => {
  const [word, ...prefixes] = line.trim().split(/\s+/);
  if (word === 'arrivals') return void process.stdout.write(`${JSON.stringify(arrivals)}\n`);
  if (word === 'edit') return void process.stdout.write(`${JSON.stringify(edit(prefixes[0]!, prefixes.slice(1).join(' ')))}\n`);
  if (word === 'refusals') return void process.stdout.write(`${JSON.stringify(refusals())}\n`);
  if (word === 'token') {
    addToken(prefixes[0]!, prefixes[1]!);
    return void process.stdout.write('"ok"\n');
  }
  if (word !== 'stats') return;
  const paths = Object.fromEntries(prefixes.map((prefix) => [prefix, byPath(prefix)]));
  process.stdout.write(`${JSON.stringify({ ...stats(), paths })}\n`);
});
process.stdin.on('end', () => void close().then(() => process.exit(0)));
