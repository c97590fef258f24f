import type pg from 'pg';

/** How long a close waits for the server's goodbye before the socket is destroyed. */
export const CLOSE_GRACE_MS = 2000;

/**
 * Ends a client's connection, also one over a hung path: end() waits for the server's
 * goodbye, which never comes there, so it has a grace, and then the socket is destroyed
 * (without it the socket would stay open for as long as TCP retries, a quarter of an hour).
 * `connected`: false while the connection is still being made (end() would wait for it).
 */
export async function closeClient(client: pg.Client, connected = true, graceMs = CLOSE_GRACE_MS): Promise<void> {
  const socket = (client as unknown as { connection: { stream: { destroy(): void } } }).connection.stream;
  if (connected) {
    let grace: NodeJS.Timeout | undefined;
    await Promise.race([client.end().catch(() => undefined), new Promise<void>((resolve) => (grace = setTimeout(resolve, graceMs)))]);
    clearTimeout(grace);
  }
  socket.destroy();
}
