import type pg from 'pg';
import type { KnownGoodStore } from './throttle.ts';

/** At most this many are loaded at a start: the throttle keeps no more in memory either. */
const LOAD_MAX = 50_000;

/** The throttle's known-good credentials in the control database (credentials_known_good). */
export function knownGoodInDatabase(pool: pg.Pool): KnownGoodStore {
  return {
    async load(now) {
      const { rows } = await pool.query<{ fingerprint: string; until: string }>(
        `SELECT fingerprint, (extract(epoch FROM good_until) * 1000)::bigint::text AS until
           FROM credentials_known_good WHERE good_until > to_timestamp($1 / 1000.0)
          ORDER BY good_until LIMIT ${LOAD_MAX}`,
        [now],
      );
      return rows.map((row) => [row.fingerprint, Number(row.until)]);
    },
    async save(fingerprint, until) {
      await pool.query(
        `WITH expired AS (DELETE FROM credentials_known_good WHERE good_until < now() - interval '1 hour')
         INSERT INTO credentials_known_good (fingerprint, good_until) VALUES ($1, to_timestamp($2 / 1000.0))
         ON CONFLICT (fingerprint) DO UPDATE SET good_until = GREATEST(credentials_known_good.good_until, EXCLUDED.good_until)`,
        [fingerprint, until],
      );
    },
  };
}
