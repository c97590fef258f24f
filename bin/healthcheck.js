#!/usr/bin/env node
// The image's HEALTHCHECK: exit 0 when the process in this container serves what its roles
// serve, 1 otherwise. Plain JavaScript without the TypeScript loader, as it runs every few
// seconds: a check that cost a second of CPU would be felt on a small machine.
//
// The roles are the service's own: TRIBUTARY_ROLES, else the `--roles` of the container's
// first process (a Procfile line run as the container's command), else all of them.
// - api, proxy, events: their port answers GET /healthz with 200;
// - sync, decoder alone (a worker, no port): the control database answers, since without it
//   a worker can do nothing.
import { readFileSync } from 'node:fs';

const TIMEOUT_MS = 3000;

function rolesOfFirstProcess() {
  try {
    const args = readFileSync('/proc/1/cmdline', 'utf8').split('\0');
    const at = args.indexOf('--roles');
    if (at >= 0) return args[at + 1];
    return args.find((a) => a.startsWith('--roles='))?.slice('--roles='.length);
  } catch {
    return undefined; // not Linux, or not in a container
  }
}

const roles = (process.env.TRIBUTARY_ROLES || rolesOfFirstProcess() || 'api,sync,decoder,proxy,events')
  .split(',')
  .map((r) => r.trim())
  .filter(Boolean);
const ports = {
  api: process.env.TRIBUTARY_API_PORT || 8080,
  proxy: process.env.TRIBUTARY_PROXY_PORT || 8081,
  events: process.env.TRIBUTARY_EVENTS_PORT || 8082,
};

async function answers(role) {
  const url = `http://127.0.0.1:${ports[role]}/healthz`;
  const response = await fetch(url, { signal: AbortSignal.timeout(TIMEOUT_MS) });
  if (response.status !== 200) throw new Error(`${url} answered ${response.status}`);
}

async function controlDatabaseAnswers() {
  if (!process.env.DATABASE_URL) return; // the embedded server lives and dies with this process
  const { default: pg } = await import('pg');
  const client = new pg.Client({ connectionString: process.env.DATABASE_URL, connectionTimeoutMillis: TIMEOUT_MS });
  try {
    await client.connect();
    await client.query('SELECT 1');
  } finally {
    await client.end().catch(() => undefined);
  }
}

try {
  const served = roles.filter((role) => role in ports);
  await Promise.all(served.length > 0 ? served.map(answers) : [controlDatabaseAnswers()]);
  process.exit(0);
} catch (error) {
  console.error(`unhealthy: ${error instanceof Error ? error.message : error}`);
  process.exit(1);
}
