import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface RunningServer {
  port: number;
  close(): Promise<void>;
}

/** Starts an HTTP server and gives back a close() that drains connections, then cuts stragglers. */
export async function listen(
  handler: http.RequestListener,
  options: { host: string; port: number; graceMs?: number },
): Promise<RunningServer> {
  const server = http.createServer({ requestTimeout: 120_000, headersTimeout: 30_000 }, handler);
  server.keepAliveTimeout = 5_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        const cut = setTimeout(() => server.closeAllConnections(), options.graceMs ?? 5_000);
        server.close(() => {
          clearTimeout(cut);
          resolve();
        });
        server.closeIdleConnections();
      }),
  };
}
