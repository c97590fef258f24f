import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';

/** A request handler; one that also answers CONNECT (the proxy refuses it) carries `onConnect`. */
export type Handler = http.RequestListener & { onConnect?: (req: http.IncomingMessage, socket: Duplex, head: Buffer) => void };

export interface RunningServer {
  port: number;
  close(): Promise<void>;
}

/** Starts an HTTP server and gives back a close() that drains connections, then cuts stragglers. */
export async function listen(handler: Handler, options: { host: string; port: number; graceMs?: number }): Promise<RunningServer> {
  const server = http.createServer({ requestTimeout: 120_000, headersTimeout: 30_000 }, handler);
  server.keepAliveTimeout = 5_000;
  // Without a listener Node drops CONNECT requests without a word.
  if (handler.onConnect) server.on('connect', handler.onConnect);
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
