import type { Arrival } from './fake-process.ts';
import { query } from './postgres.ts';

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
  const parts: string[] = [];
  for (const r of arrivals.filter((a) => a.status === 429).slice(0, 3)) {
    const second = arrivals.filter((a) => a.at > r.at - 1000 && a.at <= r.at);
    const bySender = countBy(second, (a) => (a.agent.startsWith('Tributary/') ? 'service' : 'customer'));
    const offsets = second.filter((a) => a.agent.startsWith('Tributary/')).map((a) => `+${Math.round(a.at - second[0]!.at)}`);
    const rows = await query<{ kind: string; n: number }>(
      controlUrl,
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
}

/** The limiter's log of the service's grants (restamped when sent late) under a key pattern, against what arrived: for a failure's message. */
export async function grantsLogged(controlUrl: string, keyPattern: string, arrived: number): Promise<string> {
  const rows = await query<{ ms: number }>(
    controlUrl,
    "SELECT extract(epoch FROM at) * 1000 AS ms FROM quota_requests WHERE kind IN ('sync', 'urgent') AND key LIKE $1 ORDER BY at",
    [keyPattern],
  );
  const times = rows.map((r) => Number(r.ms));
  return `the limiter logged ${times.length} grants (${arrived} arrived), at most ${peak(times, 1000)} in one second, its busiest at ${peakWindow(times, 1000)} ms`;
}

function countBy<T>(items: T[], key: (item: T) => string): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const item of items) counts[key(item)] = (counts[key(item)] ?? 0) + 1;
  return counts;
}
