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
