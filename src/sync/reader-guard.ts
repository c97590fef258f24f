import type { SyncService } from '../control/sync-service.ts';
import type { SyncRecord } from '../control/syncs.ts';
import { toError } from '../errors.ts';
import type { Logger } from '../log.ts';

/** How often a running sync puts its reader role back as provisioned. */
export const READER_CHECK_MS = 5 * 60_000;

/**
 * Keeps a sync's read-only role as it was made, while the sync runs: at the start and every
 * `everyMs`, since a reader may change its own password and defaults (provisioner.ts,
 * restoreReaderRole), and ending what outlived the reader's timeouts, which a session may lift
 * for itself. Both are logged as warnings; a failure to check is retried next time.
 */
export function guardReader(sync: SyncRecord, syncService: SyncService, logger: Logger, everyMs = READER_CHECK_MS): { stop(): void } {
  const check = () =>
    syncService.restoreReader(sync).then(
      ({ changed, cancelled, ended }) => {
        if (changed.length > 0)
          logger.warn({ role: sync.databaseRole, settings: changed }, "the reader role's settings had been changed; put back as provisioned");
        if (cancelled + ended > 0)
          logger.warn({ role: sync.databaseRole, cancelled, ended }, "ended reader statements or transactions that outlived the reader's timeouts");
      },
      (error: unknown) => logger.warn({ error: toError(error).message }, 'could not check the reader role; trying again later'),
    );
  void check();
  const timer = setInterval(check, everyMs);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}
