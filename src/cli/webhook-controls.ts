import { call } from './client.ts';
import { client, type Command, jsonOptions, listOf, UsageError } from './command.ts';
import { printJson } from './lists.ts';
import { filterFrom, filterHelp, filterOptions, keepPreviousOf, rateOf, sinceOf } from './webhook-options.ts';
import { topicOf, webhookPath } from './webhook-paths.ts';

const usage = {
  update:
    'tributary webhooks update SYNC_ID WEBHOOK_ID [--enable | --disable] [--filter-events K,K] [--changed COL ...] [--where COL=V ...] [--where-in COL=A,B ...] [--no-filter] [--max-per-second N | --no-max-per-second] [--destination URL] [--topic TOPIC ...]',
  rotate: 'tributary webhooks rotate-secret SYNC_ID WEBHOOK_ID [--keep-previous 24h|0|SECONDS]',
  recover: 'tributary webhooks recover SYNC_ID WEBHOOK_ID --since ISO_TIME|2h',
};

/** The PATCH body the update options ask for; a usage error when they ask for nothing or for both of a pair. */
function changeOf(sync: string, values: Parameters<Command['run']>[0]): Record<string, unknown> {
  const both = (a: string, b: string) => {
    if (values[a] !== undefined && values[b] !== undefined) throw new UsageError(`--${a} and --${b} go apart: give one`);
  };
  both('enable', 'disable');
  both('max-per-second', 'no-max-per-second');
  const filter = filterFrom(values);
  if (filter && values['no-filter']) throw new UsageError('--no-filter removes the filter: give it without --filter-events, --changed, --where or --where-in');
  const topics = listOf(values.topic).map((topic) => topicOf(sync, topic));
  const body: Record<string, unknown> = {
    ...(values.enable ? { enabled: true } : values.disable ? { enabled: false } : {}),
    ...(filter ? { filter } : values['no-filter'] ? { filter: null } : {}),
    ...(typeof values['max-per-second'] === 'string' ? { max_per_second: rateOf(values['max-per-second']) } : {}),
    ...(values['no-max-per-second'] ? { max_per_second: null } : {}),
    ...(typeof values.destination === 'string' ? { url: values.destination } : {}),
    ...(topics.length > 0 ? { topics } : {}),
  };
  if (Object.keys(body).length === 0) throw new UsageError('nothing to change: give --enable, --disable, a filter, --max-per-second, --destination or --topic');
  return body;
}

/** What a webhook's owner changes after creating it (docs/events.md): PATCH, rotate-secret, recover. */
export const webhookControlCommands: Record<string, Command> = {
  'webhooks update': {
    usage: usage.update,
    summary: 'enable, disable or change a webhook: its filter, rate, destination or topics',
    details: `
  --enable / --disable   a disabled webhook is sent nothing; enabled again, it resumes where
                         it stopped (nothing logged meanwhile is lost, within the retention)
  A filter given replaces the whole filter (see it with webhooks show):${filterHelp}
  --no-filter            remove the filter: every event of its topics
  --max-per-second N     at most N attempts a second (1 to 10000); --no-max-per-second: no limit
  --destination URL      a new destination (--url names the management API, as everywhere)
  --topic TOPIC          replaces the topics (repeat for more): svc.SYNC_ID.COLLECTION or COLLECTION
  Prints the webhook as it is now.
`,
    options: {
      ...jsonOptions,
      ...filterOptions,
      enable: { type: 'boolean' },
      disable: { type: 'boolean' },
      'no-filter': { type: 'boolean' },
      'max-per-second': { type: 'string' },
      'no-max-per-second': { type: 'boolean' },
      destination: { type: 'string' },
      topic: { type: 'string', multiple: true },
    },
    async run(values, [sync, webhook]) {
      const path = webhookPath(sync, webhook, usage.update);
      // The command line is checked before a token is looked for: a usage error says what is wrong with it.
      const body = changeOf(sync!, values);
      printJson(await call(await client(values), 'PATCH', path, body));
    },
  },
  'webhooks rotate-secret': {
    usage: usage.rotate,
    summary: "replace a webhook's signing secret; the new one is printed this once",
    details: `
  --keep-previous D  how long the old secret keeps signing beside the new one: 24h (the
                     default), 30m, 7d (the most), seconds, or 0 to drop it now. Until then each
                     delivery carries both signatures, so switch the receiver to the new secret
                     before previous_expires_at.
`,
    options: { ...jsonOptions, 'keep-previous': { type: 'string' } },
    async run(values, [sync, webhook]) {
      const path = `${webhookPath(sync, webhook, usage.rotate)}/rotate-secret`;
      const keep = values['keep-previous'];
      const body = typeof keep === 'string' ? { previous_expires_in: keepPreviousOf(keep) } : undefined;
      const answer = (await call(await client(values), 'POST', path, body)) as { previous_expires_at: string | null };
      printJson(answer);
      const previous = answer.previous_expires_at ? `the old secret also signs until ${answer.previous_expires_at}` : 'the old secret no longer signs';
      process.stderr.write(`The new secret is shown only this once; ${previous}.\n`);
    },
  },
  'webhooks recover': {
    usage: usage.recover,
    summary: 'send a webhook again every event of its topics since a time, then go on (it is enabled if it was not)',
    details: `
  --since T  an ISO 8601 time with a zone (2024-05-01T12:00:00Z), or a time ago: 90s, 30m,
             2h, 1d. Not in the future, and within the event log's retention (7 days by
             default); the API refuses either with the earliest time allowed.
  Events that pass its filter are sent in order per record, with their own webhook-id.
`,
    options: { ...jsonOptions, since: { type: 'string' } },
    async run(values, [sync, webhook]) {
      const path = `${webhookPath(sync, webhook, usage.recover)}/recover`;
      if (typeof values.since !== 'string') throw new UsageError('--since is needed: an ISO time, or a time ago such as 2h');
      printJson(await call(await client(values), 'POST', path, { since: sinceOf(values.since) }));
    },
  },
};
