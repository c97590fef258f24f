/**
 * `npm run demo`: the whole service beside local fake Airtable and Stripe servers seeded with
 * sample data, one sync of each, and a printout of how to query, proxy, wait and read events.
 *
 * State lives under ./.tributary-demo (TRIBUTARY_DATA_DIR) on an embedded PostgreSQL at port
 * 54330 (TRIBUTARY_PG_PORT), unless DATABASE_URL names a server. Ports: TRIBUTARY_API_PORT,
 * TRIBUTARY_PROXY_PORT, TRIBUTARY_EVENTS_PORT (8080-8082); the fakes take any free port
 * (TRIBUTARY_DEMO_AIRTABLE_PORT, TRIBUTARY_DEMO_STRIPE_PORT). The fakes are seeded the same way
 * every time, so a second run picks up the account and syncs of the first (kept in
 * demo.json in the data dir). Ctrl-C stops everything.
 */
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { loadConfig } from '../src/config.ts';
import { adminTokenFile } from '../src/control/bootstrap-files.ts';
import { DEFAULT_FAKE_BASE_ID, DEFAULT_FAKE_TOKEN } from '../fakes/airtable/cli.ts';
import { startFakeAirtable } from '../fakes/airtable/index.ts';
import { DEFAULT_FAKE_STRIPE_ACCOUNT, DEFAULT_FAKE_STRIPE_KEY } from '../fakes/stripe/cli.ts';
import { startFakeStripe } from '../fakes/stripe/index.ts';
import { createLogger, logProcessWarnings } from '../src/log.ts';
import { startService, tunablesFromEnv } from '../src/main.ts';

const BASE_ID = DEFAULT_FAKE_BASE_ID;
const env = process.env;

/** What a run leaves for the next one: the account's credentials are shown only when it is made. */
interface DemoState {
  accountId: string;
  token: string;
  eventsUsername: string;
  eventsPassword: string;
  airtableSync?: string;
  stripeSync?: string;
}

interface Answer {
  status: number;
  body: any;
}

/** A word safe to paste into a POSIX shell. */
function quote(word: string): string {
  return /^[A-Za-z0-9_\-.:/@%=+,]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`;
}

async function call(base: string, token: string, method: string, route: string, body?: unknown): Promise<Answer> {
  const response = await fetch(base + route, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : undefined };
}

async function must(answer: Promise<Answer>, what: string): Promise<any> {
  const { status, body } = await answer;
  if (status >= 300) throw new Error(`${what} failed: ${status} ${JSON.stringify(body)}`);
  return body;
}

async function loadState(file: string): Promise<DemoState | undefined> {
  try {
    return JSON.parse(await readFile(file, 'utf8')) as DemoState;
  } catch {
    return undefined;
  }
}

/** The demo's account and syncs: those of the last run when they still exist, else new ones. */
async function demoSyncs(api: string, adminToken: string, stateFile: string): Promise<{ state: DemoState; airtable: any; stripe: any }> {
  let state = await loadState(stateFile);
  if (!state || (await call(api, state.token, 'GET', '/api/syncs')).status !== 200) {
    const owner = await must(call(api, adminToken, 'POST', '/api/accounts', { name: 'demo' }), 'creating the demo account');
    state = { accountId: owner.id, token: owner.api_token, eventsUsername: owner.events.username, eventsPassword: owner.events.password };
  }
  const token = state.token;
  const existing = async (id: string | undefined) => (id ? (await call(api, token, 'GET', `/api/syncs/${id}`)).body : undefined);
  let airtable = await existing(state.airtableSync);
  if (!airtable?.id) {
    airtable = await must(
      call(api, token, 'POST', '/api/syncs', { kind: 'airtable', base_id: BASE_ID, api_key: DEFAULT_FAKE_TOKEN }),
      'creating the Airtable sync',
    );
  }
  let stripe = await existing(state.stripeSync);
  if (!stripe?.id) {
    stripe = await must(call(api, token, 'POST', '/api/syncs', { kind: 'stripe', api_key: DEFAULT_FAKE_STRIPE_KEY }), 'creating the Stripe sync');
  }
  state = { ...state, airtableSync: airtable.id, stripeSync: stripe.id };
  await writeFile(stateFile, `${JSON.stringify(state, null, 2)}\n`, { mode: 0o600 });
  return { state, airtable, stripe };
}

async function main(): Promise<void> {
  const logger = createLogger({ level: env.TRIBUTARY_LOG_LEVEL || 'warn', destination: process.stderr });
  logProcessWarnings(logger);

  const airtable = await startFakeAirtable({ port: Number(env.TRIBUTARY_DEMO_AIRTABLE_PORT || 0) });
  const base = airtable.createBase({ id: BASE_ID, name: 'Demo' });
  base.generate({
    seed: 1,
    tables: [
      { name: 'Projects', records: 20 },
      { name: 'Tasks', records: 40 },
    ],
  });
  airtable.addToken(DEFAULT_FAKE_TOKEN, { bases: [BASE_ID] });

  const stripe = await startFakeStripe({ port: Number(env.TRIBUTARY_DEMO_STRIPE_PORT || 0) });
  const stripeAccount = stripe.createAccount({ id: DEFAULT_FAKE_STRIPE_ACCOUNT });
  stripeAccount.generate({ seed: 1, customers: 10 });
  stripe.addKey(DEFAULT_FAKE_STRIPE_KEY, { account: stripeAccount.id });

  const config = loadConfig(
    { TRIBUTARY_DATA_DIR: '.tributary-demo', TRIBUTARY_PG_PORT: '54330', ...env },
    {
      upstreams: new Map([
        ['api.airtable.com', airtable.url],
        ['api.stripe.com', stripe.url],
      ]),
    },
  );
  const adminToken = config.adminToken ?? (await adminTokenFile(config.dataDir)).value;
  // The operator's environment settings (docs/operations.md), as `tributary start` takes them.
  const service = await startService({ ...config, adminToken }, logger, tunablesFromEnv(process.env));

  let stopping = false;
  const stop = async (reason: string, code: number) => {
    if (stopping) return;
    stopping = true;
    process.stderr.write(`\n${reason}: stopping the demo\n`);
    try {
      await service.stop();
      await airtable.close();
      await stripe.close();
    } catch (error) {
      process.stderr.write(`the demo did not stop cleanly: ${(error as Error).message}\n`);
      code = 1;
    }
    process.exit(code);
  };
  process.on('SIGINT', () => void stop('SIGINT', 0));
  process.on('SIGTERM', () => void stop('SIGTERM', 0));

  try {
    const host = config.publicHost;
    const api = `http://${host}:${service.apiPort}`;
    const proxy = `http://${host}:${service.proxyPort}`;
    const rest = `http://${host}:${service.eventsPort}`;
    const { state, airtable: airtableSync, stripe: stripeSync } = await demoSyncs(api, adminToken, path.join(config.dataDir, 'demo.json'));

    process.stderr.write('waiting for the first pass of both syncs (the Stripe backfill takes a few seconds)…\n');
    const waits = await Promise.all([airtableSync.id, stripeSync.id].map((id) => call(api, state.token, 'GET', `/api/wait/${id}?timeout=180000`)));
    waits.forEach((answer, i) => {
      if (answer.status !== 200 || answer.body?.ok !== true)
        process.stderr.write(`sync ${i === 0 ? airtableSync.id : stripeSync.id} has not caught up yet: ${JSON.stringify(answer.body)}\n`);
    });

    const topic = `svc.${airtableSync.id}.projects`;
    const lines = [
      `Tributary demo: the service on ${api} (proxy ${proxy}, events ${rest})`,
      `with a fake Airtable (${airtable.url}) and a fake Stripe (${stripe.url}).`,
      '',
      'Tokens',
      `  admin (operator):      ${adminToken}`,
      `  account ${state.accountId}: ${state.token}`,
      `  event credentials:     ${state.eventsUsername} / ${state.eventsPassword}`,
      '',
      `Airtable sync ${airtableSync.id}: base ${BASE_ID} (tables Projects and Tasks), fake token ${DEFAULT_FAKE_TOKEN}`,
      `  psql ${quote(airtableSync.database.url)} -c ${quote('select id, name, status from projects order by name limit 5')}`,
      `  curl -s ${quote(`${proxy}/api.airtable.com/v0/${BASE_ID}/Projects?maxRecords=3`)} -H ${quote(`Authorization: Bearer ${DEFAULT_FAKE_TOKEN}`)}`,
      '',
      `Stripe sync ${stripeSync.id}: account ${stripeAccount.id}, fake key ${DEFAULT_FAKE_STRIPE_KEY}`,
      `  psql ${quote(stripeSync.database.url)} -c ${quote('select id, email, name from customer order by created limit 5')}`,
      `  curl -s ${quote(`${proxy}/api.stripe.com/v1/customers?limit=3`)} -u ${quote(`${DEFAULT_FAKE_STRIPE_KEY}:`)}`,
      '',
      'Wait until the database and its events have caught up with everything upstream had (read-after-write):',
      `  curl -s ${quote(`${api}/api/wait/${airtableSync.id}?timeout=60000`)} -H ${quote(`Authorization: Bearer ${state.token}`)}`,
      '',
      'Events of the Projects table (REST, Upstash Kafka shapes; topics svc.<sync id>.<collection>):',
      `  curl -s ${quote(`${rest}/fetch`)} -u ${quote(`${state.eventsUsername}:${state.eventsPassword}`)} -H ${quote('Content-Type: application/json')} -d ${quote(JSON.stringify({ topic, partition: 0, offset: 0 }))}`,
      '',
      'Metrics (Prometheus text, operator token):',
      `  curl -s ${quote(`${api}/metrics`)} -H ${quote(`Authorization: Bearer ${adminToken}`)}`,
      '',
      `Press Ctrl-C to stop the demo (state stays in ${config.databaseUrl ? 'the database and ' : ''}${config.dataDir} for the next run).`,
    ];
    process.stdout.write(`${lines.join('\n')}\n`);
  } catch (error) {
    process.stderr.write(`the demo failed: ${(error as Error).message}\n`);
    await stop('failure', 1);
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`the demo failed to start: ${(error as Error).stack ?? String(error)}\n`);
  process.exit(1);
});
