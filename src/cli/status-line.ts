import { printable } from './table.ts';

/** Where a follower writes (stderr): a terminal redraws one line, a log gets a line per change. */
export interface StatusOut {
  isTTY?: boolean;
  write(text: string): unknown;
}

/**
 * One line of progress that a follower (`syncs watch`, `backfills start --wait`) updates as
 * it polls: on a terminal redrawn in place, in a log written again only when it changed.
 * Names in it come from upstream, so no control character reaches the terminal.
 */
export function statusLine(out: StatusOut): { show(text: string): void; end(): void } {
  let shown = '';
  let open = false;
  return {
    show(text) {
      const line = printable(text);
      if (out.isTTY) {
        out.write(`\r${line}\x1b[K`);
        open = true;
      } else if (line !== shown) {
        out.write(`${line}\n`);
      }
      shown = line;
    },
    /** The error or the shell prompt starts on a line of its own. */
    end() {
      if (open) out.write('\n');
      open = false;
    },
  };
}
