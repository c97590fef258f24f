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
