/**
 * The upstreams of a simulation, in a process of their own (started by remote.ts): the fake
 * Stripe account and Airtable base, the Airtable UI users who edit the base from inside it,
 * the fault rules, and the final "database = upstream" checks that read the fakes' state.
 *
 * Why a process: the fakes count each request's arrival for their rate limits. In the
 * simulation's own process, a busy event loop (events folded, Kafka read, checks) reads
 * requests late and bunched, so the fakes saw more requests in a second than were sent and
 * locked the base out for the service's "overrun". Within this process the users' edits and a
 * test clock's billing hold the loop too, so each fake also sits behind an arrival front that
 * stamps arrivals on a thread of its own (arrival-front.ts).
 *
 * Protocol (IPC, advanced serialization): `{ id, op, args }` in, `{ id, result }` or
 * `{ id, error }` out; `{ log }` for the users' notable lines; `{ ready }` once started.
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { startFakeAirtable } from '../../fakes/airtable/index.ts';
import { startFakeStripe } from '../../fakes/stripe/index.ts';
import { airtableMatchesUpstream } from '../check/airtable-upstream.ts';
import { startArrivalFront } from './arrival-front.ts';
import { stripeMatchesUpstream } from '../check/stripe-upstream.ts';
import { Random } from '../random.ts';
import { airtableUsers } from '../traffic/airtable.ts';
import type { TrafficActor } from '../types.ts';
import type { HostRequest, HostSetUp, UpstreamFault } from './protocol.ts';

const setUp = JSON.parse(process.argv[2]!) as HostSetUp;
// How late this process read what arrived: the fakes' arrival times are only as good as that.
const loopDelay = monitorEventLoopDelay({ resolution: 10 });
loopDelay.enable();
const send = (message: unknown) => process.send?.(message);
const log = (line: string) => send({ log: line });

// One upstream a process: the Stripe fake's bursts of work (a test clock advanced bills every
// subscription on it at once) would otherwise make the Airtable fake read arrivals late too.
const stripe = setUp.only === 'stripe' ? await startFakeStripe({ port: 0, trustArrivalStamps: true }) : undefined;
const account = stripe?.createAccount();
if (stripe && account) {
  stripe.addKey(setUp.stripeKey, { account: account.id });
  account.generate({ seed: setUp.seed, customers: 40 });
}

const airtable = setUp.only === 'airtable' ? await startFakeAirtable({ port: 0, trustArrivalStamps: true }) : undefined;
const base = airtable?.createBase({ id: setUp.baseId, name: 'Simulation' });
if (airtable && base) {
  airtable.addToken(setUp.airtableToken, { bases: '*' });
  base.generate({
    seed: setUp.seed,
    tables: [
      { name: 'Projects', records: 120 },
      { name: 'Tasks', records: 150 },
    ],
  });
  base.createTable(setUp.clientTable, [
    { name: 'Name', type: 'singleLineText' },
    { name: 'Seq', type: 'number', options: { precision: 0 } },
  ]);
}
const NONE = { requests: 0, rateLimited: 0 };

let users: { actors: TrafficActor[]; stop: AbortController; running: Promise<unknown> } | undefined;

function addFault(fault: UpstreamFault): void {
  const { upstream, ...rule } = fault;
  if (upstream === 'stripe') stripe?.faults.add({ match: { account: account!.id }, ...rule });
  else airtable?.faults.add({ match: { baseId: base!.id }, ...rule });
}

async function handle(request: HostRequest): Promise<unknown> {
  switch (request.op) {
    case 'fault':
      return addFault(request.fault);
    case 'clear-faults':
      airtable?.faults.clear();
      stripe?.faults.clear();
      stripe?.lateEvents.set(undefined);
      return undefined;
    case 'late-events':
      return stripe?.lateEvents.set(request.setting ?? undefined);
    case 'silent-edits': {
      const customers = account?.all('customers') ?? [];
      const random = new Random(request.seed);
      const picked = [...new Set(Array.from({ length: Math.min(request.count, customers.length) }, () => random.pick(customers)))];
      for (const c of picked) account!.silentEdit('customers', c.id as string, { name: `Renamed silently ${random.int(1_000_000)}` });
      return picked.map((c) => c.id);
    }
    case 'listed-after':
      return stripe?.lateEvents.listedAfter(request.object, request.atMs) ?? false;
    case 'stats':
      return {
        stripe: stripe ? stripe.stats.byAccount(account!.id) : NONE,
        airtable: airtable ? airtable.stats.byBase(base!.id) : NONE,
        refusals: [...(stripe?.stats.refusals() ?? []), ...(airtable?.stats.refusals() ?? [])],
        loopDelayMs: { p99: loopDelay.percentile(99) / 1e6, max: loopDelay.max / 1e6 },
      };
    case 'users-start': {
      if (users) throw new Error('the Airtable users already run');
      if (!base) throw new Error('this process has no Airtable base');
      // The same stream of choices as `new Random(seed).fork(salt)` gives in the parent.
      const actors = airtableUsers({ base, random: new Random(setUp.seed).fork(request.salt), log, reserved: [setUp.clientTable] });
      const stop = new AbortController();
      const running = Promise.all(actors.map((a) => a.run(stop.signal).catch((error: unknown) => log(`${a.name} stopped: ${(error as Error).message}`))));
      users = { actors, stop, running };
      return undefined;
    }
    case 'users-stop': {
      if (!users) return { done: [], refused: [] };
      users.stop.abort();
      await users.running;
      const done = users.actors.flatMap((a) => [...a.counts.done]);
      const refused = users.actors.flatMap((a) => [...a.counts.refused]);
      users = undefined;
      return { done, refused };
    }
    case 'check':
      return request.kind === 'stripe'
        ? stripeMatchesUpstream({ account: account!, databaseUrl: request.databaseUrl })
        : airtableMatchesUpstream({ base: base!, databaseUrl: request.databaseUrl, settings: request.settings });
    case 'close':
      users?.stop.abort();
      await users?.running;
      await front.close();
      await airtable?.close();
      await stripe?.close();
      setImmediate(() => process.exit(0));
      return undefined;
  }
}

process.on('message', (message: { id: number } & HostRequest) => {
  handle(message).then(
    (result) => send({ id: message.id, result }),
    (error: unknown) => send({ id: message.id, error: error instanceof Error ? error.message : String(error) }),
  );
});
// The simulation gone (even SIGKILLed): nothing is left running.
process.on('disconnect', () => process.exit(0));
// Arrivals are stamped by a front in a thread of its own: the users' edits and a test clock's
// billing run on this loop and would otherwise delay (and bunch) what the fakes count.
const front = await startArrivalFront((stripe ?? airtable)!.url);
send({ ready: { stripeUrl: stripe ? front.url : '', airtableUrl: airtable ? front.url : '', stripeAccount: account?.id ?? '' } });
