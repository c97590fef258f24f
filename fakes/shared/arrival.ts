import type { IncomingHttpHeaders } from 'node:http';

/**
 * The header a front in another thread sets to the wall-clock time (ms since the epoch) a
 * request reached it. A real upstream counts a request at its edge; a fake whose event loop is
 * busy (a burst of its own work) reads requests late and bunched, and would count them so.
 */
export const ARRIVAL_HEADER = 'x-fake-arrived-at';

/**
 * How long ago the request arrived, by the stamp a trusted front set (0 without one). The
 * caller subtracts it from its own clock, which may run ahead of the wall clock (test clocks).
 */
export function arrivalLatenessMs(headers: IncomingHttpHeaders, trusted: boolean): number {
  if (!trusted) return 0;
  const stamp = Number(headers[ARRIVAL_HEADER]);
  if (!Number.isFinite(stamp)) return 0;
  return Math.max(0, Date.now() - stamp);
}
