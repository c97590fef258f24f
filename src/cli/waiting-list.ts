import { call } from './client.ts';
import { client, type Command, jsonOptions, required, UsageError, type Values } from './command.ts';
import { printJson, printList } from './lists.ts';
import type { Column } from './table.ts';

interface EntryRow {
  account_id: string;
  account_name: string;
  kind: string;
  state: string;
  asked_at: string;
  admitted_at: string | null;
}

const entryColumns: Column<EntryRow>[] = [
  { header: 'KIND', value: (e) => e.kind },
  { header: 'ACCOUNT', value: (e) => e.account_id },
  { header: 'NAME', value: (e) => e.account_name },
  { header: 'STATE', value: (e) => e.state },
  { header: 'ASKED', value: (e) => e.asked_at },
  { header: 'ADMITTED', value: (e) => e.admitted_at ?? '' },
];

/** --kind, which names a kind of sync (the API says whether it has a waiting list). */
function kindOf(values: Values): string {
  if (typeof values.kind !== 'string' || values.kind === '') throw new UsageError('--kind names the kind of sync (e.g. airtable)');
  return values.kind;
}

const entryPath = (values: Values, id: string | undefined, command: string) =>
  `/api/waiting-list/${encodeURIComponent(kindOf(values))}/${encodeURIComponent(required(id, `name the account: tributary waiting-list ${command} ACCOUNT_ID --kind KIND`))}`;

/** The waiting lists (docs/management-api.md#waiting-lists): the operator lists, admits and removes. */
export const waitingListCommands: Record<string, Command> = {
  'waiting-list list': {
    usage: 'tributary waiting-list list [--kind KIND] [--state waiting|admitted] [--json]',
    summary: "the kinds of sync behind a waiting list, and who is on them (admin token: everyone; an account's token: its own)",
    options: { ...jsonOptions, kind: { type: 'string' }, state: { type: 'string' } },
    async run(values) {
      const query = new URLSearchParams();
      if (values.kind !== undefined) query.set('kind', kindOf(values));
      if (values.state !== undefined) {
        if (values.state !== 'waiting' && values.state !== 'admitted') throw new UsageError('--state takes waiting or admitted');
        query.set('state', values.state);
      }
      const answer = (await call(await client(values), 'GET', `/api/waiting-list${query.size > 0 ? `?${query}` : ''}`)) as { kinds: string[] };
      if (values.json !== true && answer.kinds.length === 0) process.stderr.write('no kind of sync is behind a waiting list (TRIBUTARY_WAITING_LIST_KINDS)\n');
      printList(answer, entryColumns, values.json === true);
    },
  },
  'waiting-list admit': {
    usage: 'tributary waiting-list admit ACCOUNT_ID --kind KIND',
    summary: 'let an account create syncs of a kind behind a waiting list, waiting or not (admin token)',
    options: { ...jsonOptions, kind: { type: 'string' } },
    async run(values, [id]) {
      printJson(await call(await client(values), 'POST', `${entryPath(values, id, 'admit')}/admit`));
    },
  },
  'waiting-list remove': {
    usage: 'tributary waiting-list remove ACCOUNT_ID --kind KIND',
    summary: 'take an account off a waiting list, waiting or admitted; its syncs keep running (admin token)',
    options: { ...jsonOptions, kind: { type: 'string' } },
    async run(values, [id]) {
      printJson(await call(await client(values), 'DELETE', entryPath(values, id, 'remove')));
    },
  },
};
