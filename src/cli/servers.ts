import { call } from './client.ts';
import { booleanArg, client, type Command, jsonOptions, secretArg, UsageError, type Values, wholeNumber } from './command.ts';
import { printJson, printList, serverColumns } from './lists.ts';

/** A whole number option that must be given. */
function count(values: Values, name: string): number {
  if (values[name] === undefined) throw new UsageError(`--${name} takes a whole number`);
  return wholeNumber(values, name, 0);
}

const serverPath = (id: string | undefined, command: string) => {
  if (!id) throw new UsageError(`name the server: tributary servers ${command} SERVER_ID`);
  return `/api/servers/${encodeURIComponent(id)}`;
};

/** The pool of target servers (operator token): the commands beside /api/servers. */
export const serverCommands: Record<string, Command> = {
  'servers add': {
    usage: 'tributary servers add SERVER_URL|- --region REGION --capacity N',
    summary: 'add a PostgreSQL server to the pool (admin token); - reads its admin URL from stdin',
    details: `
  SERVER_URL is postgres://user:password@host:5432/postgres. It is checked (wal_level=logical,
  a free replication slot and WAL sender per place, CREATEDB, CREATEROLE and REPLICATION),
  sealed, and never shown again. Pass - and pipe it in to keep its password out of ps.
`,
    options: { ...jsonOptions, region: { type: 'string' }, capacity: { type: 'string' } },
    async run(values, [url]) {
      if (!url) throw new UsageError('give the server: tributary servers add SERVER_URL|- --region REGION --capacity N');
      if (typeof values.region !== 'string') throw new UsageError('--region is needed (like us-west-2)');
      const body = { url: secretArg(url), region: values.region, capacity: count(values, 'capacity') };
      printJson(await call(await client(values), 'POST', '/api/servers', body));
    },
  },
  'servers list': {
    usage: 'tributary servers list [--json]',
    summary: 'list the pool (admin token): id, region, syncs, capacity, free places, draining, WAL bound',
    options: jsonOptions,
    async run(values) {
      printList(await call(await client(values), 'GET', '/api/servers'), serverColumns, values.json === true);
    },
  },
  'servers show': {
    usage: 'tributary servers show SERVER_ID',
    summary: 'show one server of the pool (admin token)',
    options: jsonOptions,
    async run(values, [id]) {
      const path = serverPath(id, 'show');
      printJson(await call(await client(values), 'GET', path));
    },
  },
  'servers set': {
    usage: 'tributary servers set SERVER_ID [--capacity N] [--draining true|false]',
    summary: "change a server's capacity, or drain it: it keeps its syncs and gets no new ones (admin token)",
    options: { ...jsonOptions, capacity: { type: 'string' }, draining: { type: 'string' } },
    async run(values, [id]) {
      const path = serverPath(id, 'set');
      const body: Record<string, unknown> = {};
      if (values.capacity !== undefined) body.capacity = count(values, 'capacity');
      if (values.draining !== undefined) body.draining = booleanArg('draining', values.draining as string);
      if (Object.keys(body).length === 0) throw new UsageError('give --capacity or --draining');
      printJson(await call(await client(values), 'PATCH', path, body));
    },
  },
  'servers remove': {
    usage: 'tributary servers remove SERVER_ID',
    summary: 'take an empty server out of the pool (admin token); the server itself is left as it is',
    options: jsonOptions,
    async run(values, [id]) {
      const path = serverPath(id, 'remove');
      printJson(await call(await client(values), 'DELETE', path));
    },
  },
};
