import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** One POST as a webhook receiver saw it: where, the Standard Webhooks headers, the body. */
export interface ReceivedPost {
  path: string;
  id: string;
  timestamp: string;
  signature: string;
  body: string;
  /** When it arrived (Date.now()). */
  at: number;
}

/**
 * A webhook receiver on loopback: keeps every POST and answers 204, or what `answers` says
 * for a path, after what `delays` says for it (ms).
 */
export class TestReceiver {
  readonly received: ReceivedPost[] = [];
  readonly answers = new Map<string, number>();
  readonly delays = new Map<string, number>();
  /** Answers being delayed now, and the most there were at once. */
  delayed = 0;
  mostDelayed = 0;

  private constructor(
    private readonly server: http.Server,
    readonly origin: string,
  ) {}

  static async start(): Promise<TestReceiver> {
    let receiver: TestReceiver | undefined;
    const server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const header = (name: string) => String(req.headers[name] ?? '');
        const path = req.url ?? '';
        receiver!.received.push({
          path,
          id: header('webhook-id'),
          timestamp: header('webhook-timestamp'),
          signature: header('webhook-signature'),
          body: Buffer.concat(chunks).toString('utf8'),
          at: Date.now(),
        });
        const answer = () => res.writeHead(receiver!.answers.get(path) ?? 204).end();
        const delay = receiver!.delays.get(path);
        if (!delay) return answer();
        const self = receiver!;
        self.mostDelayed = Math.max(self.mostDelayed, ++self.delayed);
        setTimeout(() => {
          self.delayed--;
          answer();
        }, delay);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    receiver = new TestReceiver(server, `http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    return receiver;
  }

  /** What was POSTed to `path`. */
  on(path: string): ReceivedPost[] {
    return this.received.filter((r) => r.path === path);
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}
