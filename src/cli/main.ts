import { parseArgs } from 'node:util';
import { loadConfig, parseRoles } from '../config.ts';
import { createLogger, logProcessWarnings } from '../log.ts';
import { startHeapTrim } from '../heap-trim.ts';
import { type Service, startService, tunablesFromEnv } from '../main.ts';
import { call } from './client.ts';
import { booleanArg, client, clientOptions, type Command, jsonArg, jsonOptions, secretArg, UsageError, wholeNumber } from './command.ts';
import { backfillCommands } from './backfills.ts';
import { serverCommands } from './servers.ts';
import { waitingListCommands } from './waiting-list.ts';
import { webhookControlCommands } from './webhook-controls.ts';
import { webhookCommands } from './webhooks.ts';
import { accountColumns, printJson, printList, syncColumns } from './lists.ts';
import { watchSync } from './watch.ts';

const clientHelp = `
  --url URL      management API (default $TRIBUTARY_URL or http://127.0.0.1:$TRIBUTARY_API_PORT)
  --token TOKEN  bearer token (default $TRIBUTARY_TOKEN, $TRIBUTARY_ADMIN_TOKEN, else
                 $TRIBUTARY_DATA_DIR/admin-token or .tributary/admin-token)`;

const jsonHelp = `
  --json         print the API's JSON answer unchanged (the stable form for scripts)`;

/** How answers are printed, in the overview: `gh` and `stripe` users expect tables and JSON like this. */
const outputHelp = `
  Lists (accounts, syncs, servers, webhooks, backfills list; webhooks deliveries) print an
  aligned table; --json prints the API's JSON. Other commands print the API's JSON answer (a
  new account's token and event password, a new webhook's secret, are shown once, there).
  Errors go to stderr: exit 1 for an API error, 2 for a bad command line (one line naming the
  option, caught before anything is sent).`;

/**
 * The fakes live beside the product, not in it (fakes/): a source checkout has them, the
 * production image does not.
 */
async function fakes<T>(load: () => Promise<T>): Promise<T> {
  try {
    return await load();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ERR_MODULE_NOT_FOUND') throw error;
    throw new Error('the fakes are not part of this installation: run `tributary fake` from a source checkout (git clone, npm install)');
  }
}

/** Node's parseArgs messages, said for this CLI (its advice about '--' does not apply here). */
function usageMessage(error: NodeJS.ErrnoException): string {
  const unknown = /^Unknown option '([^']+)'/.exec(error.message);
  if (error.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' && unknown) return `unknown option ${unknown[1]}`;
  return error.message;
}

const commands: Record<string, Command> = {
  run: {
    usage: 'tributary run [--roles api,sync,decoder,proxy,events]',
    summary: 'run the service (all roles by default)',
    options: { roles: { type: 'string' } },
    async run(values) {
      const logger = createLogger();
      logProcessWarnings(logger);
      startHeapTrim({ logger });
      const config = loadConfig(process.env, values.roles ? { roles: parseRoles(values.roles as string) } : {});
      // Handled from the start: the API answers before the other roles are up, and a signal in
      // between must still stop everything cleanly (the embedded PostgreSQL included), once started.
      let signalled: string | undefined;
      let started: Service | undefined;
      const shutdown = (signal: string) => {
        if (signalled) return;
        signalled = signal;
        logger.info({ signal }, 'shutting down');
        if (started) stopAndExit(started);
      };
      const stopAndExit = (service: Service) =>
        service.stop().then(
          () => process.exit(0),
          (err: unknown) => {
            logger.error({ err }, 'shutdown failed');
            process.exit(1);
          },
        );
      process.on('SIGTERM', () => shutdown('SIGTERM'));
      process.on('SIGINT', () => shutdown('SIGINT'));
      started = await startService(config, logger, tunablesFromEnv(process.env));
      if (signalled) return void stopAndExit(started);
      logger.info({ roles: config.roles }, 'tributary is running');
    },
  },
  'fake airtable': {
    usage: 'tributary fake airtable [--port 9101] [--records 1000] [--seed 1] [--no-rate-limit]',
    summary: 'run the local fake Airtable with a seeded "Demo" base (for trying Tributary without an Airtable account)',
    options: { port: { type: 'string' }, records: { type: 'string' }, seed: { type: 'string' }, 'no-rate-limit': { type: 'boolean' } },
    async run(values) {
      const { runFakeAirtableCli } = await fakes(() => import('../../fakes/airtable/cli.ts'));
      const fake = await runFakeAirtableCli({
        port: wholeNumber(values, 'port', 9101),
        records: wholeNumber(values, 'records', 1000),
        seed: wholeNumber(values, 'seed', 1),
        rateLimit: values['no-rate-limit'] ? false : undefined,
      });
      const close = () => void fake.close().then(() => process.exit(0));
      process.on('SIGTERM', close);
      process.on('SIGINT', close);
    },
  },
  'fake stripe': {
    usage: 'tributary fake stripe [--port 9102] [--customers 100] [--connected 0] [--seed 1] [--no-rate-limit] [--late-events SHARE:MS]',
    summary: 'run the local fake Stripe with a generated account (for trying Tributary without a Stripe account)',
    options: {
      port: { type: 'string' },
      customers: { type: 'string' },
      connected: { type: 'string' },
      seed: { type: 'string' },
      'no-rate-limit': { type: 'boolean' },
      'late-events': { type: 'string' },
    },
    async run(values) {
      const late = lateEventsArg(values['late-events']);
      const { runFakeStripeCli } = await fakes(() => import('../../fakes/stripe/cli.ts'));
      const fake = await runFakeStripeCli({
        port: wholeNumber(values, 'port', 9102),
        customers: wholeNumber(values, 'customers', 100),
        connected: wholeNumber(values, 'connected', 0),
        seed: wholeNumber(values, 'seed', 1),
        ...(values['no-rate-limit'] ? { rateLimit: false as const } : {}),
        ...(late ? { lateEvents: late } : {}),
      });
      const close = () => void fake.close().then(() => process.exit(0));
      process.on('SIGTERM', close);
      process.on('SIGINT', close);
    },
  },
  'accounts create': {
    usage: 'tributary accounts create --name NAME',
    summary: 'create an account (admin token); prints its API token and event credentials once',
    options: { ...jsonOptions, name: { type: 'string' } },
    async run(values) {
      const name = String(values.name ?? '').trim();
      if (!name) throw new UsageError('--name names the account');
      printJson(await call(await client(values), 'POST', '/api/accounts', { name }));
    },
  },
  'accounts list': {
    usage: 'tributary accounts list [--json]',
    summary: 'list accounts (admin token): id, name, created',
    options: jsonOptions,
    async run(values) {
      printList(await call(await client(values), 'GET', '/api/accounts'), accountColumns, values.json === true);
    },
  },
  'syncs create': {
    usage:
      'tributary syncs create --kind airtable|stripe --api-key KEY|- [--base-id app…] [--settings JSON] [--region REGION | --database-url URL] [--account-id ID]',
    summary: 'connect an Airtable base or a Stripe account (--api-key - reads the key from stdin; --region picks the pool region)',
    options: {
      ...jsonOptions,
      kind: { type: 'string' },
      'api-key': { type: 'string' },
      'base-id': { type: 'string' },
      settings: { type: 'string' },
      'database-url': { type: 'string' },
      region: { type: 'string' },
      'account-id': { type: 'string' },
    },
    async run(values) {
      // What the command line must name is checked here, before any request.
      if (values.kind === undefined) throw new UsageError('--kind names the kind of sync (airtable or stripe)');
      if (values['api-key'] === undefined) throw new UsageError("--api-key takes the upstream's key, or - to read it from standard input");
      const key = secretArg(String(values['api-key']));
      if (!key) throw new UsageError(values['api-key'] === '-' ? '--api-key -: standard input held no key' : '--api-key is empty');
      const body: Record<string, unknown> = { kind: values.kind, api_key: key };
      if (values['base-id']) body.base_id = values['base-id'];
      if (values.settings) body.settings = jsonArg('settings', values.settings as string);
      if (values['database-url']) body.database_url = values['database-url'];
      if (values.region) body.region = values.region;
      if (values['account-id']) body.account_id = values['account-id'];
      printJson(await call(await client(values), 'POST', '/api/syncs', body));
    },
  },
  'syncs list': {
    usage: 'tributary syncs list [--json]',
    summary: 'list syncs: id, kind, name, status, lag (age of the oldest data), created',
    options: jsonOptions,
    async run(values) {
      printList(await call(await client(values), 'GET', '/api/syncs'), syncColumns, values.json === true);
    },
  },
  'syncs show': {
    usage: 'tributary syncs show SYNC_ID',
    summary: 'show one sync: settings, database URL, event topics, status',
    options: jsonOptions,
    async run(values, [id]) {
      if (!id) throw new UsageError('name the sync: tributary syncs show SYNC_ID');
      printJson(await call(await client(values), 'GET', `/api/syncs/${encodeURIComponent(id)}`));
    },
  },
  'syncs settings': {
    usage:
      'tributary syncs settings SYNC_ID [--turbo true|false] [--debounce-ms N] [--lookup-as text|text[]] [--intelligent-cast true|false] [--stable-attachment-links true|false] [--connected-accounts true|false]',
    summary: 'change settings of a sync',
    options: {
      ...jsonOptions,
      turbo: { type: 'string' },
      'debounce-ms': { type: 'string' },
      'lookup-as': { type: 'string' },
      'intelligent-cast': { type: 'string' },
      'stable-attachment-links': { type: 'string' },
      'connected-accounts': { type: 'string' },
    },
    async run(values, [id]) {
      if (!id) throw new UsageError('name the sync: tributary syncs settings SYNC_ID …');
      const settings: Record<string, unknown> = {};
      if (values.turbo !== undefined) settings.turbo = booleanArg('turbo', values.turbo as string);
      if (values['debounce-ms'] !== undefined) settings.debounce_ms = wholeNumber(values, 'debounce-ms', 0, 86_400_000);
      if (values['lookup-as'] !== undefined) {
        if (values['lookup-as'] !== 'text' && values['lookup-as'] !== 'text[]') throw new UsageError('--lookup-as takes text or text[]');
        settings.lookup_as = values['lookup-as'];
      }
      if (values['intelligent-cast'] !== undefined) {
        settings.intelligent_cast = booleanArg('intelligent-cast', values['intelligent-cast'] as string);
      }
      if (values['stable-attachment-links'] !== undefined) {
        settings.stable_attachment_links = booleanArg('stable-attachment-links', values['stable-attachment-links'] as string);
      }
      if (values['connected-accounts'] !== undefined) {
        settings.connected_accounts = booleanArg('connected-accounts', values['connected-accounts'] as string);
      }
      printJson(await call(await client(values), 'PATCH', `/api/syncs/${encodeURIComponent(id)}`, { settings }));
    },
  },
  'syncs delete': {
    usage: 'tributary syncs delete SYNC_ID [--keep-database]',
    summary: 'stop a sync and drop its database (--keep-database keeps it)',
    options: { ...jsonOptions, 'keep-database': { type: 'boolean' } },
    async run(values, [id]) {
      if (!id) throw new UsageError('name the sync: tributary syncs delete SYNC_ID');
      const query = values['keep-database'] ? '?keep_database=true' : '';
      printJson(await call(await client(values), 'DELETE', `/api/syncs/${encodeURIComponent(id)}${query}`));
    },
  },
  'syncs watch': {
    usage: 'tributary syncs watch SYNC_ID [--interval SECONDS]',
    summary: "follow a sync's first pass as a progress bar: exit 0 once complete and normal, 1 if it turns red",
    details: `
  Polls the sync every --interval seconds (default 1). On a terminal one line is redrawn; in a
  log (stdout not a terminal) a line is printed only when the figures change. Ctrl-C exits 130.
`,
    options: { ...clientOptions, interval: { type: 'string' } },
    async run(values, [id]) {
      if (!id) throw new UsageError('name the sync: tributary syncs watch SYNC_ID');
      const interval = values.interval === undefined ? 1 : Number(values.interval);
      if (!(interval > 0)) throw new UsageError('--interval takes a number of seconds above 0');
      // Ctrl-C ends the watch, not the process mid-write: the line is closed and the exit is 130.
      const interrupt = new AbortController();
      const onInterrupt = () => interrupt.abort();
      process.once('SIGINT', onInterrupt);
      try {
        const options = { ...(await client(values)), signal: interrupt.signal };
        await watchSync({ client: options, id, intervalMs: interval * 1000, out: process.stdout });
      } catch (error) {
        if (interrupt.signal.aborted) return 130;
        throw error;
      } finally {
        process.off('SIGINT', onInterrupt);
      }
    },
  },
  ...serverCommands,
  ...waitingListCommands,
  ...webhookCommands,
  ...webhookControlCommands,
  ...backfillCommands,
};

function overview(): string {
  const lines = Object.values(commands).map((c) => `  ${c.usage}\n      ${c.summary}`);
  return `tributary: read-only PostgreSQL followers of Airtable and Stripe\n\nCommands:\n${lines.join('\n')}\n\nClient options (all but run and fake):${clientHelp}\n\nOutput:${outputHelp}\n\nEach command takes --help.\n`;
}

export async function main(argv: string[]): Promise<number> {
  const [first, second] = argv;
  const name = commands[`${first} ${second}`] ? `${first} ${second}` : first;
  const command = name ? commands[name] : undefined;
  if (!command) {
    const wanted = !first || first === '--help' || first === '-h' || first === 'help';
    if (wanted) {
      process.stdout.write(overview());
      return 0;
    }
    // "syncs bogus" names both words when the first is a group of commands.
    const group = Object.keys(commands).some((known) => known.startsWith(`${first} `));
    // A group alone, or with --help: its commands.
    if (group && (second === undefined || second === '--help' || second === '-h')) {
      const listing = Object.entries(commands)
        .filter(([known]) => known.startsWith(`${first} `))
        .map(([, c]) => `  ${c.usage}\n      ${c.summary}\n`)
        .join('');
      (second === undefined ? process.stderr : process.stdout).write(`tributary ${first} commands:\n${listing}`);
      return second === undefined ? 2 : 0;
    }
    const named = group && second !== undefined ? `${first} ${second}` : first;
    const help = group ? `tributary ${first} --help lists its commands` : 'tributary --help lists the commands';
    process.stderr.write(`tributary: unknown command "${named}" (${help})\n`);
    return 2;
  }
  const rest = argv.slice(name!.split(' ').length);
  try {
    const { values, positionals } = parseArgs({
      args: rest,
      options: { ...command.options, help: { type: 'boolean', short: 'h' } },
      allowPositionals: true,
      strict: true,
    });
    if (values.help) {
      const clientPart = command.options.token ? `\nOptions:${clientHelp}${command.options.json ? jsonHelp : ''}\n` : '\n';
      process.stdout.write(`${command.usage}\n  ${command.summary}\n${command.details ?? ''}${clientPart}`);
      return 0;
    }
    return (await command.run(values, positionals)) ?? 0;
  } catch (error) {
    // Not every error's code is a string (a failed child process's is its exit status).
    const code = String((error as NodeJS.ErrnoException).code ?? '');
    // A command line it cannot read (an unknown option, a missing value) is a usage error.
    if (code.startsWith('ERR_PARSE_ARGS') || error instanceof UsageError) {
      // One line that names what is wrong; the usage is one --help away.
      process.stderr.write(`tributary ${name}: ${usageMessage(error as NodeJS.ErrnoException)} (tributary ${name} --help)\n`);
      return 2;
    }
    process.stderr.write(`tributary ${name}: ${(error as Error).message}\n`);
    return 1;
  }
}

/** `--late-events 0.1:3000`: a share of events (0–1) that Stripe's list shows up to that many ms late. */
function lateEventsArg(value: unknown): { share: number; delayMs: number } | undefined {
  if (value === undefined) return undefined;
  const m = /^(0(?:\.\d+)?|1(?:\.0+)?):(\d{1,7})$/.exec(String(value));
  if (!m || Number(m[2]) === 0) throw new UsageError('--late-events takes SHARE:MS, a share from 0 to 1 and a delay in ms above 0, e.g. 0.1:3000');
  return { share: Number(m[1]), delayMs: Number(m[2]) };
}
