import pg from 'pg';
import type { Arrival } from './fake-process.ts';

/** The most requests that fell into any window of `ms` milliseconds (times in ms). */
export function peak(times: number[], ms: number): number {
  const sorted = [...times].sort((a, b) => a - b);
  let best = 0;
  for (let i = 0, j = 0; i < sorted.length; i++) {
    while (sorted[i]! - sorted[j]! >= ms) j++;
    best = Math.max(best, i - j + 1);
  }
  return best;
}

/**
 * The busiest window's requests, as offsets in ms from its first (`+0 +48 +51 …`): whether
 * they came spread out or bunched, for a failure's message.
 */
export function peakWindow(times: number[], ms: number): string {
  const sorted = [...times].sort((a, b) => a - b);
  let best = { from: 0, to: -1 };
  for (let i = 0, j = 0; i < sorted.length; i++) {
    while (sorted[i]! - sorted[j]! >= ms) j++;
    if (i - j > best.to - best.from) best = { from: j, to: i };
  }
  const window = sorted.slice(best.from, best.to + 1);
  return window.map((t) => `+${Math.round(t - window[0]!)}`).join(' ');
}

/**
 * For a failure's message: each 429 the fake answered (the first three), with the second before
 * it as the fake counted it (by sender, and the offsets of the service's requests) and as the
 * limiter logged it (by kind). A count the limiter's log already exceeds is its decision; one
 * only the fake's exceeds came together after the grants (sent late together, or stamped late
 * together by a starved fake).
 */
export async function refusalsExplained(arrivals: Arrival[], controlUrl: string, keyPattern: string): Promise<string> {
  const refused = arrivals.filter((a) => a.status === 429).slice(0, 3);
  const pool = new pg.Pool({ connectionString: controlUrl, max: 1 });
  try {
    const parts: string[] = [];
    for (const r of refused) {
      const second = arrivals.filter((a) => a.at > r.at - 1000 && a.at <= r.at);
      const bySender = countBy(second, (a) => (a.agent.startsWith('Tributary/') ? 'service' : 'customer'));
      const offsets = second.filter((a) => a.agent.startsWith('Tributary/')).map((a) => `+${Math.round(a.at - second[0]!.at)}`);
      const { rows } = await pool.query<{ kind: string; n: number }>(
        `SELECT kind, count(*)::int AS n FROM quota_requests WHERE key LIKE $1
            AND at > to_timestamp($2 / 1000.0) - interval '1 second' AND at <= to_timestamp($2 / 1000.0) GROUP BY kind ORDER BY kind`,
        [keyPattern, r.at],
      );
      const logged = rows.map((row) => `${row.kind} ${row.n}`).join(', ');
      parts.push(
        `${r.agent.split(' ')[0]} ${r.method} ${r.path} refused; the second before it: ${JSON.stringify(bySender)} at the fake (the service's at ${offsets.join(' ')} ms), ${logged || 'nothing'} in the limiter's log`,
      );
    }
    return parts.join('; ');
  } finally {
    await pool.end();
  }
}

function countBy<T>(items: T[], key: (item: T) => string): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const item of items) counts[key(item)] = (counts[key(item)] ?? 0) + 1;
  return counts;
}
