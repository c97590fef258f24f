/**
 * One tenant's background work against another tenant's latency and the service's memory.
 *
 *   node --import tsx bench/tenant-background.ts [--records 1000] [--backfills 6] [--seconds 20]
 *
 * The service (api, proxy, sync, decoder and events roles, its own process) runs one Airtable
 * sync for each of two accounts. Tenant A, the victim, has a webhook to a receiver that answers
 * at once; tenant B has ten webhooks, five to an address where nothing listens and five to a
 * receiver that answers after 9 s. In each phase (`seconds` long) A probes `GET /api/syncs/:id`
 * one at a time and, beside it, creates a record through the proxy three times a second; the time from the
 * proxy's answer (the row is committed before it) to the `inserted` event at A's receiver is
 * A's change-to-webhook latency.
 *
 * Phases: idle (B does nothing), then B's attack (`backfills` backfills of every row, and a
 * recovery of each webhook from an hour ago), then drain: B's receivers answer at once again
 * and everything B had queued is delivered, A probing through its first `seconds` (B's
 * receivers and A's are on one host, so they share its bound). The service's RSS is sampled
 * throughout.
 *
 * Printed: A's p50 (target: within 2× of idle) and p99 (target: under 1 s), its
 * change-to-webhook p99 (target: under 100 ms), B's attempts a second, and the RSS at idle,
 * at its peak, and once B's deliveries have drained (target: near idle).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { startFakeAirtable } from '../fakes/airtable/index.ts';
import { freePort } from '../test/harness/ports.ts';
import { api, arg, mb, percentile, sleep, startPostgres, startServiceProcess, waitForFirstCycle } from './lib.ts';

const RECORDS = arg('records', 1000);
const BACKFILLS = arg('backfills', 6);
const SECONDS = arg('seconds', 20);
/** A's proxied creates a second (Airtable allows 5 requests a second per base, the sync's own included). */
const CHANGES_PER_SECOND = 3;
const TOKEN = `patBACKGROUNDBENC.${'0123456789abcdef'.repeat(4)}`;
const SLOW_MS = 9_000;

/** A receiver that notes each delivery's event (by path) and answers at once, or after SLOW_MS while `slow`. */
async function startReceiver(port = 0) {
  const seen = new Map<string, Set<string>>();
  const inserted = new Map<string, number>();
  let attempts = 0;
  const state = { slow: false };
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      attempts++;
      const at = performance.now();
      const event = JSON.parse(body) as { event: string; id: string };
      const ids = seen.get(req.url!) ?? new Set<string>();
      seen.set(req.url!, ids);
      ids.add(req.headers['webhook-id'] as string);
      if (event.event === 'inserted' && !inserted.has(event.id)) inserted.set(event.id, at);
      const answer = () => res.writeHead(204).end();
      if (state.slow) setTimeout(answer, SLOW_MS);
      else answer();
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return {
    state,
    seen,
    inserted,
    attempts: () => attempts,
    origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

async function main(): Promise<void> {
  const postgres = await startPostgres();
  const airtable = await startFakeAirtable({ port: 0 });
  airtable.addToken(TOKEN, { bases: '*' });
  const bases = ['A', 'B'].map((name, i) => {
    const base = airtable.createBase({ name: `Tenant ${name}` });
    base.createTable('Items', [{ name: 'Name', type: 'singleLineText' }]);
    base.createRecords(
      'Items',
      Array.from({ length: i === 0 ? 20 : RECORDS }, (_, n) => ({ Name: `Item ${n}` })),
    );
    return base;
  });
  const proxyPort = await freePort();
  const svc = await startServiceProcess({
    controlUrl: await postgres.freshDatabase('ctl'),
    targetUrl: postgres.adminUrl,
    upstreams: `api.airtable.com=${airtable.url}`,
    roles: 'api,proxy,sync,decoder,events',
    env: {
      TRIBUTARY_PROXY_PORT: String(proxyPort),
      TRIBUTARY_EVENTS_PORT: String(await freePort()),
      TRIBUTARY_WEBHOOK_ALLOW_PRIVATE: '1',
    },
  });
  const fast = await startReceiver();
  const slow = await startReceiver();
  const deadPort = await freePort();
  let dead: Awaited<ReturnType<typeof startReceiver>> | undefined;
  const rss: number[] = [];
  const sampling = setInterval(() => rss.push(svc.rss()), 200);
  try {
    const tenants = [];
    for (const [i, base] of bases.entries()) {
      const account = await api(svc.api, svc.adminToken, 'POST', '/api/accounts', { name: `tenant ${'AB'[i]}` });
      const sync = await api(svc.api, account.api_token, 'POST', '/api/syncs', { kind: 'airtable', base_id: base.id, api_key: TOKEN });
      await waitForFirstCycle(svc, account.api_token, sync.id);
      tenants.push({ token: account.api_token as string, syncId: sync.id as string, baseId: base.id });
    }
    const [a, b] = tenants as [(typeof tenants)[0], (typeof tenants)[0]];
    await api(svc.api, a.token, 'POST', `/api/syncs/${a.syncId}/webhooks`, { url: `${fast.origin}/a`, topics: [`svc.${a.syncId}.items`] });
    const bHooks: string[] = [];
    for (let i = 0; i < 10; i++) {
      const origin = i < 5 ? `http://127.0.0.1:${deadPort}` : slow.origin;
      const made = await api(svc.api, b.token, 'POST', `/api/syncs/${b.syncId}/webhooks`, { url: `${origin}/b${i}`, topics: [`svc.${b.syncId}.items`] });
      bHooks.push(made.id as string);
    }
    await api(svc.api, a.token, 'GET', `/api/wait/${a.syncId}?timeout=60000`);

    /** A's probes and proxied creates, side by side, for `seconds`: the latencies of each. */
    let n = 0;
    const phase = async (seconds: number) => {
      let stopped = false;
      const created = new Map<string, number>();
      const writing = (async () => {
        for (; !stopped; n++) {
          const started = performance.now();
          const response = await fetch(`http://127.0.0.1:${proxyPort}/api.airtable.com/v0/${a.baseId}/Items`, {
            method: 'POST',
            headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
            body: JSON.stringify({ fields: { Name: `change ${n}` } }),
          });
          const record = (await response.json()) as { id?: string };
          if (!response.ok || !record.id) throw new Error(`tenant A's proxied create answered ${response.status}`);
          created.set(record.id, performance.now());
          await sleep(Math.max(0, 1000 / CHANGES_PER_SECOND - (performance.now() - started)));
        }
      })();
      const took: number[] = [];
      const until = performance.now() + seconds * 1000;
      while (performance.now() < until) {
        const started = performance.now();
        const response = await fetch(`${svc.api}/api/syncs/${a.syncId}`, { headers: { authorization: `Bearer ${a.token}` } });
        await response.arrayBuffer();
        if (!response.ok) throw new Error(`tenant A's probe answered ${response.status}`);
        took.push(performance.now() - started);
        await sleep(50);
      }
      stopped = true;
      await writing;
      const deadline = Date.now() + 30_000;
      while ([...created.keys()].some((id) => !fast.inserted.has(id)) && Date.now() < deadline) await sleep(50);
      const toWebhook = [...created].map(([id, at]) => (fast.inserted.get(id) ?? Infinity) - at);
      return {
        p50: percentile(took, 50),
        p99: percentile(took, 99),
        hookP50: percentile(toWebhook, 50),
        hookP99: percentile(toWebhook, 99),
        changes: created.size,
        probes: took.length,
      };
    };

    await phase(2); // warm: A's webhook has delivered before anything is timed
    const idle = await phase(SECONDS);
    const idleRss = Math.max(...rss.slice(-10));

    // B's attack: its slow receiver stalls; backfills of every row, and each webhook recovered from an hour ago.
    slow.state.slow = true;
    const attackFrom = rss.length;
    let attemptsBefore = slow.attempts();
    for (let i = 0; i < BACKFILLS; i++) await api(svc.api, b.token, 'POST', `/api/syncs/${b.syncId}/backfills`, {});
    const since = new Date(Date.now() - 3_600_000).toISOString();
    for (const id of bHooks) await api(svc.api, b.token, 'POST', `/api/syncs/${b.syncId}/webhooks/${id}/recover`, { since });
    await sleep(3_000);
    attemptsBefore = slow.attempts();
    const attackStarted = performance.now();
    const attack = await phase(SECONDS);
    const attackSeconds = (performance.now() - attackStarted) / 1000;
    const attackAttempts = slow.attempts() - attemptsBefore;
    const peakRss = Math.max(...rss.slice(attackFrom));

    // Drain: every receiver of B's answers at once; everything queued is delivered.
    slow.state.slow = false;
    dead = await startReceiver(deadPort);
    const drainStarted = performance.now();
    // A, while B's backlog goes out at full speed to the same host as A's receiver.
    const draining = await phase(SECONDS);
    const expected = RECORDS * (BACKFILLS + 1); // distinct webhook-ids: its inserts (the recovery re-sends them), every backfill's reads
    for (;;) {
      const counts = bHooks.map((_, i) => (i < 5 ? dead! : slow).seen.get(`/b${i}`)?.size ?? 0);
      if (counts.every((n) => n >= expected)) break;
      if (performance.now() - drainStarted > 600_000) throw new Error(`B's deliveries did not drain: ${counts.join(', ')} of ${expected}`);
      await sleep(500);
    }
    const drainSeconds = (performance.now() - drainStarted) / 1000;
    const drainedRss = Math.max(...rss.slice(-10));
    await sleep(60_000);
    const afterRss = Math.max(...rss.slice(-10));

    console.log(
      `Tenant B: ${RECORDS} rows, ${BACKFILLS} backfills, 10 webhooks (5 to nothing, 5 answering after ${SLOW_MS / 1000} s), each recovered from an hour ago`,
    );
    console.log(`Tenant A, ${SECONDS} s a phase: GET /api/syncs/:id one at a time, beside ${CHANGES_PER_SECOND} proxied creates a second to its webhook`);
    console.log('');
    console.log('| phase | A p50 | A p99 | A p50 ÷ idle (≤ 2×) | A change → webhook p50 | p99 (< 100 ms) | changes |');
    console.log('|---|---|---|---|---|---|---|');
    for (const [label, p] of [
      ['idle', idle],
      ['B attacking', attack],
      ['B draining', draining],
    ] as const) {
      console.log(
        `| ${label} | ${ms(p.p50)} | ${ms(p.p99)} | ${(p.p50 / idle.p50).toFixed(1)}× | ${ms(p.hookP50)} | ${ms(p.hookP99)} | ${p.changes} (probes: ${p.probes}) |`,
      );
    }
    console.log('');
    console.log(
      `B's slow receiver during the attack: ${(attackAttempts / attackSeconds).toFixed(0)} attempts/s; drained in ${drainSeconds.toFixed(0)} s (${expected} events per webhook)`,
    );
    console.log(
      `service RSS: idle ${mb(idleRss)}, peak during the attack ${mb(peakRss)} (${(peakRss / idleRss).toFixed(2)}× idle), at the drain's end ${mb(drainedRss)}, a minute later ${mb(afterRss)} (${(afterRss / idleRss).toFixed(2)}× idle)`,
    );
  } finally {
    clearInterval(sampling);
    await svc.stop();
    await Promise.all([fast.close(), slow.close(), dead?.close()]);
    await airtable.close();
    await postgres.stop();
  }
}

function ms(value: number): string {
  return value < 10 ? `${value.toFixed(1)} ms` : `${value.toFixed(0)} ms`;
}

await main();
