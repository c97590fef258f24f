import pg from 'pg';

/**
 * Makes a pool's connections safe to lose. pg-pool hears a client's 'error' only while the
 * client is idle: a connection the server ends while it is checked out (a crash, a restart,
 * a database dropped WITH FORCE) emits an 'error' nobody hears, and that ends the process.
 * Checked out, the failure still reaches the query that was running (or the next one); an
 * idle connection's goes to `onIdleError`. Every pool of the service is made this way.
 */
export function guardPool<P extends pg.Pool>(pool: P, onIdleError: (error: Error) => void): P {
  pool.on('error', onIdleError);
  pool.on('connect', (client) => client.on('error', () => undefined));
  return pool;
}

/** A pool made safe to lose its connections (guardPool). */
export function openPool(config: pg.PoolConfig, onIdleError: (error: Error) => void = () => undefined): pg.Pool {
  return guardPool(new pg.Pool(config), onIdleError);
}
