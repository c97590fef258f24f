/** Short human forms of the API's times and durations, for tables and the watch line. */

/** 42s, 5m, 3h, 2d: the largest unit, as `gh` lists ages. */
export function shortDuration(seconds: number): string {
  const units: Array<[string, number]> = [
    ['d', 86_400],
    ['h', 3_600],
    ['m', 60],
  ];
  for (const [unit, size] of units) if (seconds >= size) return `${Math.floor(seconds / size)}${unit}`;
  return `${Math.floor(seconds)}s`;
}

/** How long ago an ISO time was ("5m ago"); the date itself past a month. */
export function ago(iso: string, now = Date.now()): string {
  const seconds = Math.max(0, (now - Date.parse(iso)) / 1000);
  if (seconds < 5) return 'just now';
  if (seconds >= 30 * 86_400) return iso.slice(0, 10);
  return `${shortDuration(seconds)} ago`;
}

/** The sync indicator's colours, as the console shows them. */
const INDICATOR_COLOURS: Record<string, number> = { normal: 32, yellow: 33, red: 31 };

export function paintIndicator(text: string, indicator: string): string {
  const code = INDICATOR_COLOURS[indicator];
  return code === undefined ? text : `\x1b[${code}m${text}\x1b[0m`;
}

/** Colour on a terminal unless NO_COLOR is set (https://no-color.org). */
export function colourWanted(stream: { isTTY?: boolean }, env: NodeJS.ProcessEnv): boolean {
  return stream.isTTY === true && !env.NO_COLOR;
}
