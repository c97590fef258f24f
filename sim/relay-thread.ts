import { Worker } from 'node:worker_threads';
import type { RelayCommand } from './relay-worker.ts';
import { aroundPort, throughPort } from './tcp-relay.ts';

type Command = RelayCommand extends infer C ? (C extends { id: number } ? Omit<C, 'id'> : never) : never;

/**
 * The simulation's TCP relays (sim/tcp-relay.ts), run in a thread of their own. On the
 * simulation's own loop, busy with its checks, a relay held the service's requests back and
 * passed them on bunched: Airtable counted four of the sync's requests in one second where
 * the limiter had spaced three a second, and answered 429.
 */
export class RelayThread {
  private next = 0;
  private readonly waiting = new Map<number, (answer: { relay?: number; port?: number; error?: string }) => void>();

  private constructor(private readonly worker: Worker) {
    worker.on('message', (answer: { id: number; relay?: number; port?: number; error?: string }) => {
      this.waiting.get(answer.id)?.(answer);
      this.waiting.delete(answer.id);
    });
  }

  static start(): RelayThread {
    return new RelayThread(new Worker(new URL('./relay-worker.ts', import.meta.url), { execArgv: ['--import', 'tsx'] }));
  }

  /** A relay in front of `url`'s host and port. */
  async relayTo(url: string): Promise<ThreadRelay> {
    const parsed = new URL(url);
    const target = { host: parsed.hostname, port: Number(parsed.port) };
    const answer = await this.send({ op: 'start', ...target });
    return new ThreadRelay(this, answer.relay!, answer.port!, target);
  }

  async send(command: Command): Promise<{ relay?: number; port?: number }> {
    const id = ++this.next;
    const answer = await new Promise<{ relay?: number; port?: number; error?: string }>((resolve) => {
      this.waiting.set(id, resolve);
      this.worker.postMessage({ id, ...command });
    });
    if (answer.error) throw new Error(`relay thread: ${answer.error}`);
    return answer;
  }

  async close(): Promise<void> {
    await this.worker.terminate();
  }
}

/** One relay of the thread: what TcpRelay offers, by message. */
export class ThreadRelay {
  constructor(
    private readonly thread: RelayThread,
    private readonly id: number,
    readonly port: number,
    private readonly target: { host: string; port: number },
  ) {}

  through(url: string): string {
    return throughPort(url, this.port);
  }

  around(url: string): string {
    return aroundPort(url, this.port, this.target);
  }

  hang = () => this.thread.send({ op: 'hang', relay: this.id });
  heal = () => this.thread.send({ op: 'heal', relay: this.id });
  fast = () => this.thread.send({ op: 'fast', relay: this.id });
  slow = (latencyMs: number, jitterMs: number) => this.thread.send({ op: 'slow', relay: this.id, latencyMs, jitterMs });
  close = () => this.thread.send({ op: 'close', relay: this.id });
}
