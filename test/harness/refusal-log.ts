import pg from 'pg';
import type { Refusal } from '../../fakes/shared/stats.ts';
import { teeToTestLog } from './test-log.ts';

/** Control databases whose quota logs explain a 429 (one per test service of the file). */
const controlUrls = new Set<string>();

/**
 * A 429 is a fault of the shared quota or of the fake's count; its log beside the fake's
 * arrivals tells which. The test service of a file registers its control database here.
 */
export function explainRefusalsFrom(controlUrl: string): () => void {
  controlUrls.add(controlUrl);
  return () => controlUrls.delete(controlUrl);
}

/**
 * A 429 the fake answered, into the file's service log: who sent the account's requests of the
 * second before it (by user agent: the sync's client or the customer's), and how they spread;
 * then the shared quota's grants of the same span, as the limiter logged them.
 */
export function logRefusal(refusal: Refusal): void {
  const byAgent = new Map<string, number>();
  for (const a of refusal.before) {
    const agent = a.agent.split(/[ /]/)[0] ?? a.agent;
    byAgent.set(agent, (byAgent.get(agent) ?? 0) + 1);
  }
  const at = refusal.refused.at;
  teeToTestLog(
    JSON.stringify({
      msg: 'fake Stripe answered 429',
      time: Date.now(),
      refused: `${refusal.refused.method} ${refusal.refused.path} (${refusal.refused.agent.split(' ')[0]})`,
      before: Object.fromEntries(byAgent),
      arrivalsMsBefore: refusal.before.map((a) => `${Math.round(at - a.at)} ${a.agent.split(/[ /]/)[0]} ${a.method} ${a.path}`),
    }),
    'fake-stripe',
  );
  for (const url of controlUrls) void logGrants(url, `stripe:${refusal.refused.key}`, at);
}

/** The quota's log of the 1.5 s before the refused arrival (ms before it, kind), read once. */
async function logGrants(controlUrl: string, key: string, at: number): Promise<void> {
  const client = new pg.Client({ connectionString: controlUrl });
  try {
    await client.connect();
    const { rows } = await client.query<{ ms: number; kind: string }>(
      `SELECT round(($2::float8 - extract(epoch FROM at) * 1000)::numeric, 1)::float8 AS ms, kind
         FROM quota_requests WHERE key = $1 AND at > to_timestamp(($2::float8 - 1500) / 1000) ORDER BY at`,
      [key, at],
    );
    if (rows.length === 0) return;
    teeToTestLog(JSON.stringify({ msg: 'the shared quota granted', key, grantsMsBefore: rows.map((r) => `${r.ms} ${r.kind}`) }), 'fake-stripe');
  } catch {
    // The service may be gone already; the arrivals above are still logged.
  } finally {
    await client.end().catch(() => undefined);
  }
}
