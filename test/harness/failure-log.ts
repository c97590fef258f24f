/** How far before a failure the runner shows the service's log, and how many lines at most. */
const BEFORE_MS = 20_000;
const AFTER_MS = 2_000;
const MAX_LINES = 80;

/** The time of a log line: pino's `"time":<ms>` (after any `[source] ` prefix), or undefined. */
function timeOf(line: string): number | undefined {
  const match = /"time":(\d{13})/.exec(line);
  return match ? Number(match[1]) : undefined;
}

/**
 * The lines of a service log that came from BEFORE_MS before a failure to AFTER_MS after it,
 * the last MAX_LINES of them. A line with no time of its own (a stack, a child's bare output)
 * takes the time of the line before it. When no line falls in the window, the last lines.
 */
export function failureWindow(lines: string[], failedAt: number): { lines: string[]; total: number } {
  const all = lines.filter((line) => line !== '');
  let last: number | undefined;
  const dated = all.map((line) => {
    last = timeOf(line) ?? last;
    return { line, time: last };
  });
  const timed = dated.some((d) => d.time !== undefined);
  const inWindow = timed ? dated.filter((d) => d.time !== undefined && d.time >= failedAt - BEFORE_MS && d.time <= failedAt + AFTER_MS) : [];
  // Nothing logged near the failure (a file that failed long after its last line): its last lines.
  const shown = inWindow.length > 0 ? inWindow : dated;
  return { lines: shown.slice(-MAX_LINES).map((d) => d.line), total: all.length };
}
