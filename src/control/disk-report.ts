import { statfs } from 'node:fs/promises';
import type pg from 'pg';
import { toError } from '../errors.ts';
import type { Logger } from '../log.ts';

/** How often the free space is read: a disk fills over minutes, and a read is one syscall. */
const EVERY_MS = 60_000;

/**
 * Writes the free space of the disk the embedded server's data lives on into its row of the
 * pool, for `GET /api/servers` and the metrics (docs/operations.md#wal-retention). Only the
 * process that started the server knows where its data is; a server of the operator's own
 * has no figure (PostgreSQL cannot say it in SQL without an extension).
 */
export function startDiskReport(options: { pool: pg.Pool; dir: string; logger: Logger; everyMs?: number }): () => Promise<void> {
  const read = async () => {
    try {
      const fs = await statfs(options.dir);
      await options.pool.query('UPDATE servers SET free_disk_bytes = $1, disk_read_at = now() WHERE url_enc IS NULL', [fs.bavail * fs.bsize]);
    } catch (error) {
      options.logger.debug({ err: toError(error) }, 'could not report the embedded server’s free disk');
    }
  };
  void read();
  const timer = setInterval(() => void read(), options.everyMs ?? EVERY_MS);
  timer.unref();
  return async () => clearInterval(timer);
}
