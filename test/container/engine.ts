/**
 * The container engine for the image tests: podman where it is installed, else docker
 * (CONTAINER_ENGINE=docker or podman picks one). Each command runs as an operator would type
 * it. For podman, containers.conf beside this file sets what a small or nested machine needs
 * (runc, cgroupfs, ulimits no higher than the machine's); an operator's own engine needs none
 * of it.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { repoRoot } from '../harness/process.ts';

export const IMAGE = 'tributary:test';

export interface Engine {
  name: 'podman' | 'docker';
  /** Runs the engine with `args`; rejects with its stderr when it exits non-zero. */
  exec(args: string[], options?: { timeoutMs?: number; cwd?: string; input?: string; stderrToo?: boolean }): Promise<string>;
  /** The environment every engine command gets (podman's containers.conf). */
  env: NodeJS.ProcessEnv;
}

/** Runs a program; resolves with its stdout, rejects with its stderr when it exits non-zero. */
export function command(
  program: string,
  args: string[],
  options: { timeoutMs?: number; cwd?: string; input?: string; env?: NodeJS.ProcessEnv; stderrToo?: boolean } = {},
): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(program, args, { env: options.env ?? process.env, cwd: options.cwd ?? repoRoot, stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (options.stderrToo ? (out += c.toString()) : (err += c.toString())));
    const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? 600_000);
    child.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      if (code === 0) resolve(out);
      else reject(new Error(`${program} ${args.join(' ')} exited ${code}: ${(err || out).slice(-4000)}`));
    });
    child.stdin.on('error', () => undefined); // a program that exits without reading its input
    child.stdin.end(options.input ?? '');
  });
}

/** The engine that can run a container here, or an error that says plainly why none can. */
export async function containerEngine(): Promise<Engine> {
  const reasons: string[] = [];
  const chosen = process.env.CONTAINER_ENGINE;
  const names: Array<'podman' | 'docker'> = chosen === 'docker' || chosen === 'podman' ? [chosen] : ['podman', 'docker'];
  for (const name of names) {
    const env = name === 'podman' ? { ...process.env, CONTAINERS_CONF: path.join(repoRoot, 'test', 'container', 'containers.conf') } : process.env;
    const engine: Engine = { name, env, exec: (args, options = {}) => command(name, args, { ...options, env }) };
    try {
      // `info` needs a working engine, not only its client: docker's client without a daemon fails here.
      await engine.exec(['info'], { timeoutMs: 60_000 });
      return engine;
    } catch (error) {
      reasons.push(`${name}: ${(error as Error).message.split('\n')[0]}`);
    }
  }
  throw new Error(
    `no container engine can run here (${reasons.join('; ')}). Install one: apt-get install podman runc (or Docker), then run npm run test:image again`,
  );
}

/** The Dockerfile's first FROM. */
const BASE = /^FROM\s+(\S+)/m.exec(readFileSync(path.join(repoRoot, 'docker', 'Dockerfile'), 'utf8'))![1]!;

/** The Dockerfile's base image: there already, pulled, or (no registry reachable) made by docker/local-base.sh. */
export async function ensureBaseImage(engine: Engine): Promise<'present' | 'pulled' | 'made'> {
  const how = await baseImage(engine);
  // The engine's client and service answered; now it must start a container too.
  await engine.exec(['run', '--rm', '--pull=never', '--network', 'none', BASE, 'true'], { timeoutMs: 120_000 }).catch((error: Error) => {
    throw new Error(`${engine.name} cannot start a container here: ${error.message}`);
  });
  return how;
}

async function baseImage(engine: Engine): Promise<'present' | 'pulled' | 'made'> {
  const present = await engine.exec(['image', 'inspect', BASE]).then(
    () => true,
    () => false,
  );
  if (present) return 'present';
  try {
    await engine.exec(['pull', BASE], { timeoutMs: 120_000 });
    return 'pulled';
  } catch {
    await command(path.join(repoRoot, 'docker', 'local-base.sh'), [], { env: { ...engine.env, CONTAINER_ENGINE: engine.name } });
    return 'made';
  }
}

/**
 * Builds docker/Dockerfile as it is, from the repository, as IMAGE. podman builds in the
 * docker format (the OCI format has no HEALTHCHECK) and never pulls the base.
 */
export async function buildImage(engine: Engine, tag = IMAGE): Promise<void> {
  // docker's `build --pull` is a yes/no (pull always); its default uses the local base.
  const flags = engine.name === 'podman' ? ['--format', 'docker', '--pull=never'] : [];
  const idOf = () =>
    engine.exec(['image', 'inspect', '--format', '{{.Id}}', tag]).then(
      (id) => id.trim(),
      () => undefined,
    );
  const before = await idOf();
  await engine.exec(['build', ...flags, '--network', 'host', '-f', 'docker/Dockerfile', '-t', tag, '.'], { timeoutMs: 900_000 });
  // The image the tag named before would pile up, untagged, build after build.
  if (before && before !== (await idOf())) await engine.exec(['rmi', before]).catch(() => undefined);
}

export interface Container {
  name: string;
  /** Its output so far, stdout and stderr. */
  logs(): Promise<string>;
  running(): Promise<boolean>;
  /** `stop` (SIGTERM, then SIGKILL after `graceSeconds`): how long it took, and the exit code. */
  stop(graceSeconds?: number): Promise<{ ms: number; exitCode: number }>;
  /** The image's HEALTHCHECK, run now: true when it passed. */
  healthy(): Promise<boolean>;
  remove(): Promise<void>;
}

export interface RunOptions {
  name: string;
  env?: Record<string, string>;
  volumes?: string[];
  command?: string[];
  image?: string;
}

/** Starts a container of the image in the background, on the host's network (the fakes and the harness's servers are on loopback). */
export async function runContainer(engine: Engine, options: RunOptions): Promise<Container> {
  // -v: with the container goes the anonymous volume the image's VOLUME gave it.
  await engine.exec(['rm', '-f', '-v', options.name]).catch(() => undefined);
  const env = Object.entries(options.env ?? {}).flatMap(([k, v]) => ['-e', `${k}=${v}`]);
  const volumes = (options.volumes ?? []).flatMap((v) => ['-v', v]);
  await engine.exec(['run', '-d', '--name', options.name, '--network', 'host', ...env, ...volumes, options.image ?? IMAGE, ...(options.command ?? [])]);
  return containerNamed(engine, options.name);
}

/** A container already made (by the engine's run, or compose's), by its name. */
export function containerNamed(engine: Engine, name: string): Container {
  return {
    name,
    // The container's stderr (where a failed start says why) comes on the engine's.
    logs: () => engine.exec(['logs', name], { stderrToo: true }).catch((error: Error) => error.message),
    running: async () => (await engine.exec(['inspect', '--format', '{{.State.Running}}', name]).catch(() => 'false')).trim() === 'true',
    async stop(graceSeconds = 10) {
      const started = Date.now();
      await engine.exec(['stop', '-t', String(graceSeconds), name]);
      const ms = Date.now() - started;
      const exitCode = Number((await engine.exec(['inspect', '--format', '{{.State.ExitCode}}', name])).trim());
      return { ms, exitCode };
    },
    async healthy() {
      if (engine.name === 'podman') {
        return engine.exec(['healthcheck', 'run', name]).then(
          () => true,
          () => false,
        );
      }
      // docker runs the check on its own schedule; wait for its verdict.
      const deadline = Date.now() + 90_000;
      for (;;) {
        const status = (await engine.exec(['inspect', '--format', '{{.State.Health.Status}}', name])).trim();
        if (status !== 'starting' || Date.now() > deadline) return status === 'healthy';
        await new Promise((r) => setTimeout(r, 1000));
      }
    },
    remove: async () => {
      await engine.exec(['rm', '-f', '-v', name]).catch(() => undefined);
    },
  };
}

/** GETs `url` until it answers 200 (a container starting), or throws after `timeoutMs` with the container's log. */
export async function waitForHealth(url: string, container: Container, timeoutMs = 60_000): Promise<number> {
  const started = Date.now();
  for (;;) {
    const status = await fetch(url, { signal: AbortSignal.timeout(2000) }).then(
      (r) => r.status,
      () => 0,
    );
    if (status === 200) return Date.now() - started;
    const exited = !(await container.running());
    if (exited || Date.now() - started > timeoutMs) {
      const why = exited ? 'the container exited' : `no answer within ${timeoutMs} ms`;
      throw new Error(`${url} never answered 200 (${why}):\n${(await container.logs()).slice(-3000)}`);
    }
    await new Promise((r) => setTimeout(r, 250));
  }
}

export interface Compose {
  /** Runs compose with `args`; resolves with its stdout. */
  run(args: string[], env: NodeJS.ProcessEnv): Promise<string>;
  close(): Promise<void>;
}

/**
 * Docker's compose: its plugin (`docker compose`), else docker-compose. With podman it talks
 * to podman's Docker-compatible API, served on a socket of the test's own for as long as the
 * test needs it (podman-compose was tried: it starts every service despite --no-deps).
 */
export async function dockerCompose(engine: Engine): Promise<Compose> {
  let program: string | undefined;
  let prefix: string[] = [];
  for (const [candidate, words] of [
    ['docker', ['compose']],
    ['docker-compose', []],
  ] as const) {
    if (
      await command(candidate, [...words, 'version']).then(
        () => true,
        () => false,
      )
    ) {
      program = candidate;
      prefix = [...words];
      break;
    }
  }
  if (!program) throw new Error('no compose here: install docker-compose (apt-get install docker-compose) or Docker with its compose plugin');
  let service: ChildProcess | undefined;
  let host: Record<string, string> = {};
  if (engine.name === 'podman') {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'tributary-podman-api-'));
    const socket = path.join(dir, 'podman.sock');
    service = spawn('podman', ['system', 'service', '--time=0', `unix://${socket}`], { env: engine.env, stdio: 'ignore' });
    for (const deadline = Date.now() + 20_000; !existsSync(socket); await new Promise((r) => setTimeout(r, 100))) {
      if (Date.now() > deadline) throw new Error('podman system service made no socket in 20 s');
    }
    host = { DOCKER_HOST: `unix://${socket}` };
  }
  const tool = program;
  return {
    run: (args, env) => command(tool, [...prefix, ...args], { env: { ...env, ...host }, timeoutMs: 300_000 }),
    async close() {
      service?.kill();
    },
  };
}
