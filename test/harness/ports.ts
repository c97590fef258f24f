import { readFileSync } from 'node:fs';
import net from 'node:net';

/**
 * The first port of the kernel's ephemeral range (ports it hands to `listen(0)` and to every
 * outgoing connection). A port found free inside that range can be taken by any connection
 * another test file opens before the port's user binds it (a demo once lost its API port so).
 */
function ephemeralStart(): number {
  try {
    const first = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    return Number.isInteger(first) && first > 2000 ? first : 0;
  } catch {
    return 0;
  }
}

const EPHEMERAL_START = ephemeralStart();

/** Binds `port` on loopback for a moment: the port bound, or undefined when it is taken. */
export function bindable(port: number): Promise<number | undefined> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(undefined));
    server.listen(port, '127.0.0.1', () => {
      const { port: bound } = server.address() as net.AddressInfo;
      server.close(() => resolve(bound));
    });
  });
}

/**
 * A port that was free a moment ago, below the ephemeral range where the kernel knows it (so
 * only another caller of this function could take it first, with two files at a time a
 * chance of about 1 in 10,000); otherwise any free port.
 */
export async function freePort(): Promise<number> {
  if (EPHEMERAL_START > 0) {
    const low = Math.max(1024, EPHEMERAL_START - 12_000);
    for (let attempt = 0; attempt < 50; attempt++) {
      const port = await bindable(low + Math.floor(Math.random() * (EPHEMERAL_START - low)));
      if (port !== undefined) return port;
    }
  }
  const port = await bindable(0);
  if (port === undefined) throw new Error('no free port');
  return port;
}
