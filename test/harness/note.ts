/**
 * A line a test file prints for every run, passed or failed: the runner (test/run.ts) shows
 * a passing file's output only for lines that start with NOTE, under the file's own line.
 */
export const NOTE = '[note] ';

export function note(line: string): void {
  process.stdout.write(`${NOTE}${line}\n`);
}
