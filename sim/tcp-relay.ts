import net from 'node:net';

/**
 * A TCP relay in front of a server, for the fault a crash never makes: a path that stops
 * passing bytes without closing. `hang()` stops reading on every connection through it
 * (nothing is acknowledged past the kernel's buffers, nothing is closed) and holds new ones
 * the same way, as a network that dropped its route or a NAT that lost its state does.
 * `heal()` lets new connections through; those caught in the hang stay dead, never closed,
 * as they would out there, so only a client that notices them on its own gets going again.
 */
export class TcpRelay {
  private hung = false;
  private readonly open = new Set<Path>();
  /** Connections made through the relay so far. */
  connections = 0;

  private constructor(
    private readonly server: net.Server,
    private readonly target: { host: string; port: number },
  ) {}

  static async start(target: { host: string; port: number }): Promise<TcpRelay> {
    const server = net.createServer();
    const relay = new TcpRelay(server, target);
    server.on('connection', (client) => relay.accept(client));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    return relay;
  }

  get port(): number {
    return (this.server.address() as net.AddressInfo).port;
  }

  /** `url` with its host and port replaced by the relay's. */
  through(url: string): string {
    const parsed = new URL(url);
    parsed.hostname = '127.0.0.1';
    parsed.port = String(this.port);
    return parsed.toString();
  }

  /** Every connection through the relay stops, for good; new ones stop too until heal(). */
  hang(): void {
    this.hung = true;
    for (const path of this.open) path.kill();
  }

  heal(): void {
    this.hung = false;
  }

  /** Connections open through the relay now, dead ones included. */
  get openConnections(): number {
    return this.open.size;
  }

  async close(): Promise<void> {
    for (const path of this.open) path.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: net.Socket): void {
    this.connections++;
    const path = new Path(client, net.connect(this.target.port, this.target.host), () => this.open.delete(path));
    this.open.add(path);
    if (this.hung) path.kill();
  }
}

/** One connection through the relay: both sockets, passing bytes until killed. */
class Path {
  private dead = false;

  constructor(
    private readonly client: net.Socket,
    private readonly upstream: net.Socket,
    closed: () => void,
  ) {
    for (const socket of [client, upstream]) socket.on('error', () => undefined);
    client.on('close', closed);
    this.pass(client, upstream);
    this.pass(upstream, client);
  }

  /** Reads nothing more, ever, and closes nothing: the peers' bytes wait unacknowledged. */
  kill(): void {
    this.dead = true;
    this.client.pause();
    this.upstream.pause();
  }

  destroy(): void {
    this.client.destroy();
    this.upstream.destroy();
  }

  private pass(from: net.Socket, to: net.Socket): void {
    from.on('data', (chunk) => {
      if (this.dead) return; // read just as the hang began: lost with the route
      if (!to.write(chunk)) from.pause();
    });
    to.on('drain', () => {
      if (!this.dead) from.resume();
    });
    // A real close at either end goes through, unless the path is dead.
    from.on('end', () => {
      if (!this.dead) to.end();
    });
    from.on('close', () => {
      if (!this.dead) to.destroy();
    });
  }
}
