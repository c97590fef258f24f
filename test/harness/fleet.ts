import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { freePort } from './ports.ts';
import { type Spawned, spawnTributary, waitFor } from './process.ts';

/** What every process of a fleet shares: the control database, the secret key, the operator token, the upstreams. */
export interface FleetShared {
  controlUrl: string;
  targetUrl: string;
  upstreams: string;
  secretKey: string;
  adminToken: string;
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

/** One `tributary run --roles …` process of a split deployment, as the Procfile starts them. */
export interface FleetProcess {
  name: string;
  roles: string;
  pid: number;
  api: string;
  proxy: string;
  events: string;
  spawned: Spawned;
  /** Its log so far, the lines that are JSON. */
  log(): LogLine[];
  kill(signal: NodeJS.Signals): Promise<number | string>;
}

const started = new Set<FleetProcess>();
// A test file that ends without stopping its fleet leaves no process behind.
process.on('exit', () => {
  for (const { spawned } of started) spawned.child.kill('SIGKILL');
});

/** Every fleet process started so far (a set-up that failed half-way stops these). */
export const fleetProcesses = (): FleetProcess[] => [...started];

/** Starts one process with `roles` and waits until it says it is running. Each has its own ports and data folder. */
export async function startFleetProcess(name: string, roles: string, shared: FleetShared): Promise<FleetProcess> {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'tributary-fleet-'));
  const [apiPort, proxyPort, eventsPort] = [await freePort(), await freePort(), await freePort()];
  const spawned = spawnTributary(['run', '--roles', roles], {
    DATABASE_URL: shared.controlUrl,
    TRIBUTARY_TARGET_DATABASE_URL: shared.targetUrl,
    TRIBUTARY_SECRET_KEY: shared.secretKey,
    TRIBUTARY_ADMIN_TOKEN: shared.adminToken,
    TRIBUTARY_UPSTREAMS: shared.upstreams,
    TRIBUTARY_DATA_DIR: dataDir,
    TRIBUTARY_API_PORT: String(apiPort),
    TRIBUTARY_PROXY_PORT: String(proxyPort),
    TRIBUTARY_EVENTS_PORT: String(eventsPort),
    // The workers' "sync started" lines are what the overlap check reads.
    TRIBUTARY_LOG_LEVEL: 'info',
  });
  void spawned.exited.then(() => rm(dataDir, { recursive: true, force: true }));
  const log = () =>
    spawned
      .output()
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .flatMap((line) => {
        try {
          return [JSON.parse(line) as LogLine];
        } catch {
          return [];
        }
      });
  await waitFor(
    `${name} to start`,
    async () => {
      if (spawned.child.exitCode !== null) throw new Error(`${name} exited at start:\n${spawned.output().slice(-3000)}`);
      return log().some((line) => line.msg === 'tributary is running') || undefined;
    },
    60_000,
  ).catch((error: unknown) => {
    spawned.child.kill('SIGKILL'); // not yet in `started`
    throw new Error(`${(error as Error).message}\n${spawned.output().slice(-3000)}`);
  });
  const fleetProcess: FleetProcess = {
    name,
    roles,
    pid: spawned.child.pid!,
    api: `http://127.0.0.1:${apiPort}`,
    proxy: `http://127.0.0.1:${proxyPort}`,
    events: `http://127.0.0.1:${eventsPort}`,
    spawned,
    log,
    async kill(signal) {
      if (spawned.child.exitCode === null && spawned.child.signalCode === null) spawned.child.kill(signal);
      return spawned.exited;
    },
  };
  started.add(fleetProcess);
  return fleetProcess;
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
