import { mkdir } from 'node:fs/promises';
import http from 'node:http';
import path from 'node:path';
import { pause } from '../src/time.ts';
import { type ErrorLine, type Fleet, type FleetLayout, type FleetProcess, type FleetShared, startFleet } from '../test/harness/fleet.ts';
import { Balancer } from './balancer.ts';
import type { Random } from './random.ts';

/** The fleet the simulation runs: every role apart, several of each but the events role. */
export const SIM_LAYOUT: FleetLayout = { api: 2, proxy: 2, events: 1, workers: 2 };

/** The order in which SIGKILLs go round the roles: a worker first, then the others. */
const KILL_ROLES = ['sync,decoder', 'proxy', 'api', 'events'] as const;

/**
 * The service as a split deployment runs it: a fleet of `tributary run --roles …` processes
 * (test/harness/fleet.ts), each logging to a file of its own, with a load balancer in front
 * of each role's processes that clients and the checks reach it through.
 */
export class ServiceFleet {
  private kills = 0;

  private constructor(
    readonly fleet: Fleet,
    readonly api: Balancer,
    readonly proxy: Balancer,
    readonly events: Balancer,
  ) {}

  /** apiPort: the API balancer's port, when the processes were told it (TRIBUTARY_PUBLIC_URL). */
  static async start(shared: FleetShared, dir: string, layout: FleetLayout = SIM_LAYOUT, apiPort = 0): Promise<ServiceFleet> {
    await ensureDir(path.join(dir, 'logs'));
    const fleet = await startFleet(shared, layout, (name) => ({ dataDir: path.join(dir, name), logFile: path.join(dir, 'logs', `${name}.log`) }));
    const behind = (list: FleetProcess[], role: 'api' | 'proxy' | 'events', port = 0) =>
      Balancer.start(
        list.map((p) => ({ name: p.name, port: p.ports[role] })),
        port,
      );
    return new ServiceFleet(fleet, await behind(fleet.apis, 'api', apiPort), await behind(fleet.proxies, 'proxy'), await behind(fleet.events, 'events'));
  }

  /** Error-level lines of every process, and anything one printed that is not its log. */
  get errors(): ErrorLine[] {
    return this.fleet.all.flatMap((p) => p.errors);
  }

  /** The resident memory of its largest process. */
  async memoryKb(): Promise<number | undefined> {
    const sizes = (await Promise.all(this.fleet.all.map((p) => p.memoryKb()))).filter((kb) => kb !== undefined);
    return sizes.length ? Math.max(...sizes) : undefined;
  }

  /**
   * SIGKILLs one process, the roles taken in turn (a worker first) and the process of the
   * role at random, and starts it again after `downMs`, as a supervisor would. Returns its name.
   */
  async killOne(random: Random, downMs: number, signal: AbortSignal): Promise<string> {
    const roles = KILL_ROLES[this.kills++ % KILL_ROLES.length]!;
    const victim = random.pick(this.fleet.all.filter((p) => p.roles === roles));
    await victim.kill('SIGKILL');
    await pause(downMs, signal);
    await victim.restart();
    return victim.name;
  }

  /** Requests each process took through its role's balancer. */
  requests(): Map<string, number> {
    return new Map([this.api, this.proxy, this.events].flatMap((b) => [...b.requests]));
  }

  async stop(): Promise<void> {
    await Promise.all([this.api.close(), this.proxy.close(), this.events.close()]);
    await this.fleet.stop();
  }
}

export type ReceiverMode = 'up' | 'down' | 'flapping';

/**
 * A webhook destination: keeps every delivery it accepts. `down` refuses every delivery
 * with a 503, `flapping` every other one.
 */
export class WebhookReceiver {
  readonly deliveries: Array<{ path: string; id: string; body: string; timestamp: string; signature: string }> = [];
  mode: ReceiverMode = 'up';
  refused = 0;
  /** Paths answered `410 Gone` (a destination whose owner took it down), whatever the mode. */
  readonly gone = new Set<string>();
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
    if (this.gone.has(req.url ?? '')) {
      res.writeHead(410).end();
      return;
    }
    this.flip = !this.flip;
    if (this.mode === 'down' || (this.mode === 'flapping' && this.flip)) {
      this.refused++;
      res.writeHead(503).end();
      return;
    }
    this.deliveries.push({
      path: req.url ?? '',
      id: String(req.headers['svc-event-id'] ?? req.headers['webhook-id'] ?? ''),
      body,
      timestamp: String(req.headers['webhook-timestamp'] ?? ''),
      signature: String(req.headers['webhook-signature'] ?? ''),
    });
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
