/** The broker process: spawning, stopping and restarting one Kafka JVM. */
import { spawn, type ChildProcess } from 'node:child_process';
import { rmSync } from 'node:fs';
import fs from 'node:fs/promises';
import net from 'node:net';
import { installExitHooks, liveBrokers, spawnOrphanGuard } from './cleanup.ts';
import { javaArgs, type BrokerLayout } from './config.ts';
import { readFileOr } from './helpers.ts';
import { READY_TIMEOUT_MS, waitUntilReady } from './readiness.ts';
import type { KafkaBroker } from './types.ts';

const STOP_GRACE_MS = 15_000;

/** A JVM that died or never became ready; the message carries the relevant log lines. */
export class BrokerStartError extends Error {}

export class LocalKafka implements KafkaBroker {
  readonly brokers: string[];
  readonly saslBrokers: string[];
  readonly frontedBrokers?: string[];
  readonly adminUser: { username: string; password: string };
  private child: ChildProcess | undefined;
  private guard: ChildProcess | undefined;
  private childExit: Promise<void> = Promise.resolve();
  private recentOutput: string[] = [];
  private stopped = false;

  constructor(
    private readonly libs: string,
    private readonly layout: BrokerLayout,
    private readonly log: (line: string) => void,
  ) {
    this.brokers = [`127.0.0.1:${layout.plaintextPort}`];
    this.saslBrokers = [`127.0.0.1:${layout.saslPort}`];
    if (layout.fronted) this.frontedBrokers = [`127.0.0.1:${layout.fronted.advertised}`];
    this.adminUser = { ...layout.admin };
    // Registered from the start so an interrupted start still cleans up its temp dir.
    liveBrokers.add(this);
    installExitHooks();
  }

  get isStopped(): boolean {
    return this.stopped;
  }

  async launch(): Promise<void> {
    const started = Date.now();
    const child = spawn('java', javaArgs(this.libs, this.layout, 'kafka.Kafka', [this.layout.propertiesFile]), {
      cwd: this.layout.dir,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child = child;
    this.recentOutput = [];

    let exitDescription = '';
    const guard = child.pid === undefined ? undefined : spawnOrphanGuard(child.pid, this.layout.dir);
    this.guard = guard;
    this.childExit = new Promise((resolve) => {
      child.once('exit', (code, signal) => {
        exitDescription = signal ? `signal ${signal}` : `code ${code}`;
        guard?.kill();
        resolve();
      });
      child.once('error', (err) => {
        exitDescription = `spawn error: ${err.message}`;
        resolve();
      });
    });
    const hasExited = () => exitDescription !== '';
    this.forwardOutput(child);
    // The broker must not keep the test process alive: the exit hook kills it
    // once the tests are done, so no explicit stop() is needed for sharedKafka().
    child.unref();

    const early = this.childExit.then(() => {
      throw new BrokerStartError(`Kafka exited early (${exitDescription}).`);
    });
    try {
      await Promise.race([early, waitUntilReady(this.brokers, started + READY_TIMEOUT_MS, hasExited)]);
    } catch (err) {
      await this.killJvm();
      const message = err instanceof Error ? err.message : String(err);
      throw new BrokerStartError(`${message}\n--- log tail (${this.layout.dir}) ---\n${await this.logTail()}`);
    } finally {
      early.catch(() => {}); // the exit of a JVM we stop later is not an error
    }
    this.log(`Kafka ready on ${this.brokers[0]} (SASL ${this.saslBrokers[0]}) after ${((Date.now() - started) / 1000).toFixed(1)} s`);
  }

  async restart(): Promise<void> {
    if (this.stopped) throw new Error('restart() after stop()');
    await this.killJvm();
    await this.launch();
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    await this.killJvm();
    liveBrokers.delete(this);
    await fs.rm(this.layout.dir, { recursive: true, force: true });
  }

  /** SIGTERM gives Kafka a clean shutdown (flushed logs, no recovery on restart); SIGKILL if it hangs. */
  private async killJvm(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    // This timer is also what keeps the event loop alive while we wait for the unref'd child.
    const escalate = setTimeout(() => {
      this.log(`Kafka did not stop within ${STOP_GRACE_MS / 1000} s; sending SIGKILL`);
      child.kill('SIGKILL');
    }, STOP_GRACE_MS);
    try {
      await this.childExit;
    } finally {
      clearTimeout(escalate);
    }
  }

  /** Synchronous, for process 'exit' handlers. */
  killNow(): void {
    const child = this.child;
    if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    this.guard?.kill();
    rmSync(this.layout.dir, { recursive: true, force: true });
  }

  private forwardOutput(child: ChildProcess): void {
    for (const stream of [child.stdout, child.stderr]) {
      if (!stream) continue;
      if (stream instanceof net.Socket) stream.unref(); // see child.unref() above
      let partial = '';
      stream.setEncoding('utf8');
      stream.on('data', (chunk: string) => {
        const lines = (partial + chunk).split('\n');
        partial = lines.pop() ?? '';
        for (const line of lines) this.onOutputLine(line);
      });
      stream.on('end', () => {
        if (partial) this.onOutputLine(partial);
      });
    }
  }

  private onOutputLine(line: string): void {
    this.recentOutput.push(line);
    if (this.recentOutput.length > 50) this.recentOutput.shift();
    this.log(line);
  }

  /** The cause of a failed start usually scrolls out of the tail behind shutdown noise, so errors come first. */
  private async logTail(): Promise<string> {
    const lines = (await readFileOr(this.layout.serverLog, '')).split('\n');
    const errors = lines.flatMap((line, i) => (/^\[[^\]]+\] (ERROR|FATAL) /.test(line) ? lines.slice(i, i + 4) : [])).slice(0, 40);
    return ['--- errors in server.log ---', ...errors, '--- end of server.log ---', ...lines.slice(-25), '--- stdout/stderr ---', ...this.recentOutput].join(
      '\n',
    );
  }
}
