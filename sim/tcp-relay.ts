import net from 'node:net';

/**
 * A TCP relay in front of a server, for the fault a crash never makes: a path that stops
 * passing bytes without closing. `hang()` stops reading on every connection through it
 * (nothing is acknowledged past the kernel's buffers, nothing is closed) and holds new ones
 * the same way, as a network that dropped its route or a NAT that lost its state does.
 * `heal()` lets new connections through; those caught in the hang stay dead, never closed,
 * as they would out there, so only a client that notices them on its own gets going again.
 * `slow()` holds every chunk back for a latency with jitter (in order, each direction apart),
 * as a congested or far-away path does, until `fast()`.
 */
/** `url` with its host and port replaced by a relay's on `port`. */
export function throughPort(url: string, port: number): string {
  const parsed = new URL(url);
  parsed.hostname = '127.0.0.1';
  parsed.port = String(port);
  return parsed.toString();
}

/** `url` as it reaches `target` itself, when it names the relay on `port`; else unchanged. */
export function aroundPort(url: string, port: number, target: { host: string; port: number }): string {
  const parsed = new URL(url);
  if (Number(parsed.port) !== port) return url;
  parsed.hostname = target.host;
  parsed.port = String(target.port);
  return parsed.toString();
}

export class TcpRelay {
  private hung = false;
  private slowness: { latencyMs: number; jitterMs: number } | undefined;
  private readonly open = new Set<Path>();
  /** Connections made through the relay so far. */
  connections = 0;

  private constructor(
    private readonly server: net.Server,
    private target: { host: string; port: number },
  ) {}

  static async start(target: { host: string; port: number }): Promise<TcpRelay> {
    // Half-open: a peer's end is passed on when the chunks before it are, not answered at once.
    const server = net.createServer({ allowHalfOpen: true });
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
    return throughPort(url, this.port);
  }

  /** `url` as it reaches the server itself, when it names the relay; else unchanged. */
  around(url: string): string {
    return aroundPort(url, this.port, this.target);
  }

  /**
   * New connections go to `target` from now on, and those open are cut (reset): what a name
   * that follows the primary does at a failover (a DNS record, a virtual IP, a proxy).
   */
  retarget(target: { host: string; port: number }): void {
    this.target = target;
    for (const path of this.open) path.destroy();
  }

  /** Every connection through the relay stops, for good; new ones stop too until heal(). */
  hang(): void {
    this.hung = true;
    for (const path of this.open) path.kill();
  }

  heal(): void {
    this.hung = false;
  }

  /** From now on each chunk waits `latencyMs` plus up to `jitterMs` more, on every connection. */
  slow(latencyMs: number, jitterMs: number): void {
    this.slowness = { latencyMs, jitterMs };
  }

  fast(): void {
    this.slowness = undefined;
  }

  /** How long the next chunk waits (0 on a fast path). */
  private delay(): number {
    const slow = this.slowness;
    return slow ? slow.latencyMs + Math.random() * slow.jitterMs : 0;
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
    const path = new Path(
      client,
      net.connect({ port: this.target.port, host: this.target.host, allowHalfOpen: true }),
      () => this.open.delete(path),
      () => this.delay(),
    );
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
    private readonly delay: () => number,
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
    // A slow path delays each chunk, never reorders: the chunks wait in a queue, each due at
    // its own time or after the one before it, and a close waits for the chunks before it.
    const queue: Array<{ at: number; chunk?: Buffer; close?: () => void }> = [];
    let timer: NodeJS.Timeout | undefined;
    const flush = () => {
      timer = undefined;
      while (queue.length > 0 && queue[0]!.at <= Date.now()) {
        const { chunk, close } = queue.shift()!;
        if (this.dead) continue; // read just as the hang began: lost with the route
        if (chunk && !to.write(chunk)) from.pause();
        close?.();
      }
      if (queue.length > 0) timer = setTimeout(flush, queue[0]!.at - Date.now());
    };
    const enqueue = (item: { chunk?: Buffer; close?: () => void }, wait: number) => {
      const at = Math.max(Date.now() + wait, queue.at(-1)?.at ?? 0);
      queue.push({ at, ...item });
      if (!timer) timer = setTimeout(flush, at - Date.now());
    };
    from.on('data', (chunk: Buffer) => {
      if (this.dead) return;
      const wait = this.delay();
      if (wait === 0 && queue.length === 0) {
        if (!to.write(chunk)) from.pause();
      } else enqueue({ chunk }, wait);
    });
    to.on('drain', () => {
      if (!this.dead) from.resume();
    });
    // A real close at either end goes through, unless the path is dead.
    const inTurn = (close: () => void) => (queue.length === 0 ? close() : enqueue({ close }, 0));
    from.on('end', () =>
      inTurn(() => {
        if (!this.dead) to.end();
      }),
    );
    from.on('close', () =>
      inTurn(() => {
        if (!this.dead) to.destroy();
      }),
    );
  }
}
