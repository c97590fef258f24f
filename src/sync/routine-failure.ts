import { toError } from '../errors.ts';
import type { Logger } from '../log.ts';

/**
 * Logs a failure of a sync's database connection: a warning, unless the sync is no longer
 * active. A delete drops the database with its connections, so the sync's decoder and runner
 * lose theirs before they are stopped; that is routine, and logged at debug. `active` asks the
 * control database; when it cannot tell, the failure is a warning.
 */
export function logUnlessDeleted(active: () => Promise<boolean>, logger: Logger): (err: unknown, message: string) => Promise<void> {
  return async (err, message) => {
    const still = await active().catch(() => true);
    if (still) logger.warn({ err: toError(err) }, message);
    else logger.debug({ err: toError(err) }, `${message} (the sync is being deleted)`);
  };
}
