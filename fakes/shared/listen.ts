import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** Starts listening; resolves with the bound port and a base URL (IPv6 hosts bracketed). */
export async function listen(server: Server, port: number, host: string): Promise<{ port: number; url: string }> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const bound = (server.address() as AddressInfo).port;
  return { port: bound, url: `http://${host.includes(':') ? `[${host}]` : host}:${bound}` };
}

/** Drops open sockets (hung requests included) and waits for the server to close. */
export async function closeServer(server: Server): Promise<void> {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
}
