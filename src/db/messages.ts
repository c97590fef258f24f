/**
 * Prefixes of the logical messages (`pg_logical_emit_message`) written into sync databases.
 * The decoder reads the swap, read and wait ones; the others mark the WAL for anyone reading it.
 */
export const MESSAGE_PREFIX = {
  /** Transactional: the columns of a table a rebuild swaps in, before its row differences. */
  swapColumns: 'tributary.swap.columns',
  /** Transactional: one row difference of a swap, decoded as if it were a row change. */
  swapRow: 'tributary.swap.row',
  /** Transactional: a rebuilt table was swapped in. */
  swap: 'tributary.swap',
  /** Transactional: a table was dropped with its upstream one. */
  drop: 'tributary.drop',
  /** Transactional: a backfill's chunk of rows, read under a table share lock in the emitting transaction (src/backfill/chunk.ts). */
  read: 'tributary.read',
  /** Transactional: a gap in the stream (a lost slot replaced), before the re-read of the sync's tables (src/decoder/slot-recovery.ts). */
  gap: 'tributary.gap',
  /** Not transactional: a wait marker, answered once the decoder has read past it. */
  wait: 'tributary.wait',
  /** Not transactional: written so that the commit after it flushes the WAL behind a proxied write (src/proxy/targets.ts). */
  flush: 'tributary.flush',
} as const;
