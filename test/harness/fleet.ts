import { randomBytes } from 'node:crypto';
import { createWriteStream, type WriteStream } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { freePort } from './ports.ts';
import { SERVICE_NODE_FLAGS } from '../../src/cli/node-flags.ts';
import { pause } from '../../src/time.ts';
import { type Spawned, spawnTributary } from './process.ts';

/** What every process of a fleet shares: the control database, the secret key, the operator token, the upstreams. */
export interface FleetShared {
  controlUrl: string;
  targetUrl: string;
  upstreams: string;
  secretKey: string;
  adminToken: string;
  /** More environment for every process (KAFKA_BROKERS, TRIBUTARY_WEBHOOK_ALLOW_PRIVATE …). */
  env?: Record<string, string>;
}

export const fleetShared = (options: Omit<FleetShared, 'secretKey' | 'adminToken'>): FleetShared => ({
  ...options,
  secretKey: randomBytes(32).toString('base64'),
  adminToken: `tra_fleet_${randomBytes(12).toString('hex')}`,
});

/** A line of a process's JSON log. */
export interface LogLine {
  time: number;
  msg: string;
  part?: string;
  sync?: string;
  [field: string]: unknown;
}

/** An error-level line of a process's log, or anything it printed that is not its log (a crash's stack). */
export interface ErrorLine {
  process: string;
  time: number;
  text: string;
}

export interface FleetProcessOptions {
  /** Its data folder; by default a temporary one, removed when it stops. */
  dataDir?: string;
  /** Where its log goes, line by line; by default it is kept in memory (`log()`, `output()`). */
  logFile?: string;
}

const started = new Set<FleetProcess>();
// A test file that ends without stopping its fleet leaves no process behind.
process.on('exit', () => {
  for (const p of started) p.spawned.child.kill('SIGKILL');
});

/** Every fleet process started so far (a set-up that failed half-way stops these). */
export const fleetProcesses = (): FleetProcess[] => [...started];

/**
 * One `tributary run --roles …` process of a split deployment, as the Procfile starts them,
 * with the service's Node flags. It has its own ports and data folder, kept when it is
 * SIGKILLed and `restart()`ed, as a supervisor would start it again.
 */
export class FleetProcess {
  spawned!: Spawned;
  readonly errors: ErrorLine[] = [];
  private readonly lines: string[] = [];
  starts = 0;
  private running = false;
  private readonly file: WriteStream | undefined;

  private constructor(
    readonly name: string,
    readonly roles: string,
    private readonly env: NodeJS.ProcessEnv,
    readonly ports: { api: number; proxy: number; events: number },
    private readonly dataDir: string,
    private readonly ownDataDir: boolean,
    logFile: string | undefined,
  ) {
    this.file = logFile ? createWriteStream(logFile, { flags: 'a' }) : undefined;
  }

  /** Starts one process with `roles` and waits until it says it is running. */
  static async start(name: string, roles: string, shared: FleetShared, options: FleetProcessOptions = {}): Promise<FleetProcess> {
    const dataDir = options.dataDir ?? (await mkdtemp(path.join(os.tmpdir(), 'tributary-fleet-')));
    const ports = { api: await freePort(), proxy: await freePort(), events: await freePort() };
    const env = {
      DATABASE_URL: shared.controlUrl,
      TRIBUTARY_TARGET_DATABASE_URL: shared.targetUrl,
      TRIBUTARY_SECRET_KEY: shared.secretKey,
      TRIBUTARY_ADMIN_TOKEN: shared.adminToken,
      TRIBUTARY_UPSTREAMS: shared.upstreams,
      TRIBUTARY_DATA_DIR: dataDir,
      TRIBUTARY_API_PORT: String(ports.api),
      TRIBUTARY_PROXY_PORT: String(ports.proxy),
      TRIBUTARY_EVENTS_PORT: String(ports.events),
      // The workers' "sync started" lines are what the overlap check reads.
      // FLEET_LOG_LEVEL=debug adds each sweep's counts to a failure's log lines.
      TRIBUTARY_LOG_LEVEL: process.env.FLEET_LOG_LEVEL ?? 'info',
      ...shared.env,
    };
    const fleetProcess = new FleetProcess(name, roles, env, ports, dataDir, !options.dataDir, options.logFile);
    await fleetProcess.restart();
    return fleetProcess;
  }

  get pid(): number {
    return this.spawned.child.pid!;
  }

  get api(): string {
    return `http://127.0.0.1:${this.ports.api}`;
  }

  get proxy(): string {
    return `http://127.0.0.1:${this.ports.proxy}`;
  }

  get events(): string {
    return `http://127.0.0.1:${this.ports.events}`;
  }

  /** What it printed so far, when its log is not going to a file. */
  output(): string {
    return this.lines.join('\n');
  }

  /** Its log so far, the lines that are JSON (none when it goes to a file). */
  log(): LogLine[] {
    return this.lines
      .filter((line) => line.startsWith('{'))
      .flatMap((line) => {
        try {
          return [JSON.parse(line) as LogLine];
        } catch {
          return [];
        }
      });
  }

  /** Starts it (again, after a kill: same ports, data folder and log) and waits until it says it is running. */
  async restart(): Promise<void> {
    if (this.running) throw new Error(`${this.name} is running`);
    this.starts++;
    let up = false;
    const onLine = (text: string) => {
      if (this.file) this.file.write(`${text}\n`);
      else this.lines.push(text);
      let parsed: { level?: number; time?: number; msg?: string } | undefined;
      try {
        parsed = text.startsWith('{') ? (JSON.parse(text) as typeof parsed) : undefined;
      } catch {
        parsed = undefined;
      }
      if (parsed?.msg === 'tributary is running') up = true;
      // Anything the process prints that is not its log counts as an error.
      if (typeof parsed?.level !== 'number' || parsed.level >= 50) this.errors.push({ process: this.name, time: parsed?.time ?? Date.now(), text });
    };
    const spawned = spawnTributary(['run', '--roles', this.roles], this.env, undefined, {
      nodeFlags: SERVICE_NODE_FLAGS,
      onLine,
      testLog: this.file ? false : this.name,
    });
    this.spawned = spawned;
    this.running = true;
    started.add(this);
    void spawned.exited.then(() => (this.running = false));
    const deadline = Date.now() + 120_000;
    while (!up) {
      const failed = !this.running ? 'exited while starting' : Date.now() > deadline ? 'did not start in 120 s' : undefined;
      if (failed) {
        await this.kill('SIGKILL');
        throw new Error(`${this.name} ${failed}\n${this.file ? `see ${this.file.path}` : this.output().slice(-3000)}`);
      }
      await pause(200);
    }
  }

  /** Resolves with its exit code (or the signal's name) once it has exited. */
  kill(signal: NodeJS.Signals): Promise<number | string> {
    const child = this.spawned.child;
    if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    return this.spawned.exited;
  }

  /** SIGTERM, SIGKILL after 20 s; then its log is closed and its own data folder removed. */
  async stop(): Promise<void> {
    const timer = setTimeout(() => this.spawned.child.kill('SIGKILL'), 20_000);
    await this.kill('SIGTERM');
    clearTimeout(timer);
    started.delete(this);
    if (this.file) await new Promise<void>((resolve) => this.file!.end(resolve));
    if (this.ownDataDir) await rm(this.dataDir, { recursive: true, force: true });
  }

  /** Its resident memory, while it runs. */
  async memoryKb(): Promise<number | undefined> {
    if (!this.running) return undefined;
    const status = await readFile(`/proc/${this.pid}/status`, 'utf8').catch(() => '');
    const match = /VmRSS:\s+(\d+) kB/.exec(status);
    return match ? Number(match[1]) : undefined;
  }
}

/** How many processes of each role a fleet runs (workers run `sync,decoder`). */
export interface FleetLayout {
  api: number;
  proxy: number;
  events: number;
  workers: number;
}

export interface Fleet {
  apis: FleetProcess[];
  proxies: FleetProcess[];
  events: FleetProcess[];
  workers: FleetProcess[];
  all: FleetProcess[];
  stop(): Promise<void>;
}

/**
 * The Procfile's roles as separate processes sharing one control database. The first API
 * process migrates it; the rest then start side by side. `options(name)` places each one's
 * data folder and log. A set-up that fails half-way stops what it started.
 */
export async function startFleet(shared: FleetShared, layout: FleetLayout, options: (name: string) => FleetProcessOptions = () => ({})): Promise<Fleet> {
  const start = (name: string, roles: string) => FleetProcess.start(name, roles, shared, options(name));
  const names = (role: string, n: number) => Array.from({ length: n }, (_, i) => `${role}-${i + 1}`);
  const before = new Set(started);
  try {
    const first = await start('api-1', 'api');
    const rest = await Promise.all([
      ...names('api', layout.api)
        .slice(1)
        .map((name) => start(name, 'api')),
      ...names('proxy', layout.proxy).map((name) => start(name, 'proxy')),
      ...names('events', layout.events).map((name) => start(name, 'events')),
      ...names('worker', layout.workers).map((name) => start(name, 'sync,decoder')),
    ]);
    const all = [first, ...rest];
    const of = (roles: string) => all.filter((p) => p.roles === roles);
    return {
      apis: of('api'),
      proxies: of('proxy'),
      events: of('events'),
      workers: of('sync,decoder'),
      all,
      stop: async () => void (await Promise.all(all.map((p) => p.stop()))),
    };
  } catch (error) {
    await Promise.all([...started].filter((p) => !before.has(p)).map((p) => p.stop()));
    throw error;
  }
}

/** A time span a worker ran one sync's part (`sync` runner or `decoder`), from its log. */
export interface RunSpan {
  worker: string;
  part: string;
  sync: string;
  from: number;
  to: number;
}

/**
 * The spans each worker ran each sync's runner and decoder, from its "sync started" and
 * "stopping it here" lines; a span still open ends at `endOf(worker)` (its kill, or the check).
 */
export function runSpans(workers: FleetProcess[], endOf: (worker: FleetProcess) => number): RunSpan[] {
  const spans: RunSpan[] = [];
  for (const worker of workers) {
    const open = new Map<string, RunSpan>();
    for (const line of worker.log()) {
      if (!line.sync || !line.part) continue;
      const key = `${line.part} ${line.sync}`;
      if (line.msg === 'sync started') {
        if (open.has(key)) throw new Error(`${worker.name} started ${key} twice without stopping it`);
        open.set(key, { worker: worker.name, part: line.part, sync: line.sync, from: line.time, to: Number.POSITIVE_INFINITY });
      } else if (line.msg.includes('stopping it here')) {
        const span = open.get(key);
        if (span) spans.push({ ...span, to: line.time });
        open.delete(key);
      }
    }
    for (const span of open.values()) spans.push({ ...span, to: endOf(worker) });
  }
  return spans;
}

/** Spans of one sync's part on two workers that overlap in time. */
export function overlaps(spans: RunSpan[]): string[] {
  const found: string[] = [];
  const byKey = new Map<string, RunSpan[]>();
  for (const span of spans) {
    const key = `${span.part} ${span.sync}`;
    byKey.set(key, [...(byKey.get(key) ?? []), span]);
  }
  for (const [key, list] of byKey) {
    const sorted = [...list].sort((a, b) => a.from - b.from);
    for (let i = 1; i < sorted.length; i++) {
      const [a, b] = [sorted[i - 1]!, sorted[i]!];
      if (b.from < a.to) found.push(`${key}: ${a.worker} ran it until ${new Date(a.to).toISOString()}, ${b.worker} from ${new Date(b.from).toISOString()}`);
    }
  }
  return found;
}
