import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, type WriteStream } from 'node:fs';
import { mkdir, readFile } from 'node:fs/promises';
import http from 'node:http';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { SERVICE_NODE_FLAGS } from '../src/cli/node-flags.ts';

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** A log line of the service, as pino writes it. */
export interface LogLine {
  level: number;
  time: number;
  msg: string;
  text: string;
}

/**
 * The service as users run it (`node bin/tributary.js run`), in a process of its own so the
 * simulation can SIGKILL it. Its log goes to a file; error-level lines are handed to `onError`.
 */
export class ServiceProcess {
  private child: ChildProcess | undefined;
  private exited: Promise<void> = Promise.resolve();
  private readonly log: WriteStream;
  readonly errors: LogLine[] = [];
  starts = 0;

  constructor(
    private readonly env: NodeJS.ProcessEnv,
    readonly logFile: string,
    readonly apiUrl: string,
  ) {
    this.log = createWriteStream(logFile, { flags: 'a' });
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  async start(): Promise<void> {
    this.starts++;
    const child = spawn(process.execPath, [...SERVICE_NODE_FLAGS, path.join(repoRoot, 'bin', 'tributary.js'), 'run'], {
      cwd: repoRoot,
      env: { PATH: process.env.PATH, HOME: process.env.HOME, ...this.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child = child;
    this.exited = new Promise((resolve) => child.once('exit', () => resolve()));
    for (const stream of [child.stdout!, child.stderr!]) {
      createInterface({ input: stream }).on('line', (text) => {
        this.log.write(`${text}\n`);
        let parsed: { level?: number; time?: number; msg?: string } | undefined;
        try {
          parsed = JSON.parse(text) as typeof parsed;
        } catch {
          parsed = undefined;
        }
        // Anything the service prints that is not its log (a crash's stack) counts as an error.
        const level = typeof parsed?.level === 'number' ? parsed.level : 60;
        if (level >= 50) this.errors.push({ level, time: parsed?.time ?? Date.now(), msg: parsed?.msg ?? text, text });
      });
    }
    const deadline = Date.now() + 120_000;
    for (;;) {
      if (child.exitCode !== null || child.signalCode !== null) throw new Error(`the service exited while starting; see ${this.logFile}`);
      const up = await fetch(`${this.apiUrl}/healthz`).then(
        (r) => r.ok,
        () => false,
      );
      if (up) return;
      if (Date.now() > deadline) throw new Error(`the service did not start in 120 s; see ${this.logFile}`);
      await new Promise((r) => setTimeout(r, 250));
    }
  }

  /** SIGKILL: no shutdown hooks, no flush. */
  async kill(): Promise<void> {
    this.child?.kill('SIGKILL');
    await this.exited;
  }

  async stop(): Promise<void> {
    this.child?.kill('SIGTERM');
    const timer = setTimeout(() => this.child?.kill('SIGKILL'), 20_000);
    await this.exited;
    clearTimeout(timer);
    await new Promise<void>((resolve) => this.log.end(resolve));
  }

  async memoryKb(): Promise<number | undefined> {
    if (!this.child?.pid) return undefined;
    const status = await readFile(`/proc/${this.child.pid}/status`, 'utf8').catch(() => '');
    const match = /VmRSS:\s+(\d+) kB/.exec(status);
    return match ? Number(match[1]) : undefined;
  }
}

export type ReceiverMode = 'up' | 'down' | 'flapping';

/**
 * A webhook destination: keeps every delivery it accepts. `down` refuses every delivery
 * with a 503, `flapping` every other one.
 */
export class WebhookReceiver {
  readonly deliveries: Array<{ path: string; id: string; body: string }> = [];
  mode: ReceiverMode = 'up';
  refused = 0;
  private flip = false;

  private constructor(
    private readonly server: http.Server,
    readonly url: string,
  ) {}

  static async start(): Promise<WebhookReceiver> {
    let receiver: WebhookReceiver | undefined;
    const server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => receiver!.receive(req, Buffer.concat(chunks).toString('utf8'), res));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as { port: number };
    receiver = new WebhookReceiver(server, `http://127.0.0.1:${port}`);
    return receiver;
  }

  private receive(req: http.IncomingMessage, body: string, res: http.ServerResponse): void {
    this.flip = !this.flip;
    if (this.mode === 'down' || (this.mode === 'flapping' && this.flip)) {
      this.refused++;
      res.writeHead(503).end();
      return;
    }
    this.deliveries.push({ path: req.url ?? '', id: String(req.headers['svc-event-id'] ?? req.headers['webhook-id'] ?? ''), body });
    res.writeHead(204).end();
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

export async function ensureDir(dir: string): Promise<string> {
  await mkdir(dir, { recursive: true });
  return dir;
}
