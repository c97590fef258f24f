import { call } from './client.ts';
import { client, type Command, jsonOptions, listOf, UsageError } from './command.ts';
import { deliveryColumns, printJson, printList, webhookColumns } from './lists.ts';
import { filterFrom, filterHelp, filterOptions, rateOf } from './webhook-options.ts';
import { topicOf, webhookPath, webhooksPath } from './webhook-paths.ts';

const usage = {
  list: 'tributary webhooks list SYNC_ID [--json]',
  show: 'tributary webhooks show SYNC_ID WEBHOOK_ID',
  create:
    'tributary webhooks create SYNC_ID DESTINATION_URL --topic TOPIC [--topic TOPIC ...] [--filter-events K,K] [--changed COL ...] [--where COL=V ...] [--where-in COL=A,B ...] [--max-per-second N] [--backfill]',
  delete: 'tributary webhooks delete SYNC_ID WEBHOOK_ID',
  deliveries: 'tributary webhooks deliveries SYNC_ID WEBHOOK_ID [--status STATUS] [--after ID] [--limit N] [--json]',
  replay: 'tributary webhooks replay SYNC_ID WEBHOOK_ID [--id DELIVERY_ID ...]',
};

/** A sync's webhook destinations (docs/events.md): the commands beside /api/syncs/:id/webhooks. */
export const webhookCommands: Record<string, Command> = {
  'webhooks list': {
    usage: usage.list,
    summary: "list a sync's webhooks: id, destination URL, topics, state (and why when disabled), created",
    options: jsonOptions,
    async run(values, [sync]) {
      printList(await call(await client(values), 'GET', webhooksPath(sync, usage.list)), webhookColumns, values.json === true);
    },
  },
  'webhooks show': {
    usage: usage.show,
    summary: 'show one webhook with its delivery counts (delivered, waiting, exhausted)',
    options: jsonOptions,
    async run(values, [sync, webhook]) {
      printJson(await call(await client(values), 'GET', webhookPath(sync, webhook, usage.show)));
    },
  },
  'webhooks create': {
    usage: usage.create,
    summary: "add a webhook: the topics' events are POSTed to the URL, signed with a secret printed this once",
    details: `
  DESTINATION_URL  where events are POSTed (http:// or https://); an argument, since --url
                   names the management API like everywhere else
  --topic TOPIC    a topic of the sync (svc.SYNC_ID.tasks) or just its collection (tasks);
                   repeat it for more
  Only some events (docs/events.md, Filters), all conditions together:${filterHelp}
  --max-per-second N     at most N attempts a second to it (1 to 10000; retries included)
  --backfill             first send it the current rows of its topics, as read events (a
                         backfill for it alone; the answer's "backfill" says which)
  The answer carries the signing secret (whsec_…): it is shown only here, so keep it.
`,
    options: {
      ...jsonOptions,
      ...filterOptions,
      topic: { type: 'string', multiple: true },
      'max-per-second': { type: 'string' },
      backfill: { type: 'boolean' },
    },
    async run(values, [sync, destination]) {
      const path = webhooksPath(sync, usage.create);
      if (!destination) throw new UsageError('give the destination URL: where the events are POSTed');
      const topics = listOf(values.topic).map((topic) => topicOf(sync!, topic));
      if (topics.length === 0) throw new UsageError('--topic is needed, once per topic (svc.SYNC_ID.COLLECTION, or the collection)');
      const filter = filterFrom(values);
      const body = {
        url: destination,
        topics,
        ...(filter ? { filter } : {}),
        ...(typeof values['max-per-second'] === 'string' ? { max_per_second: rateOf(values['max-per-second']) } : {}),
        ...(values.backfill === true ? { backfill: true } : {}),
      };
      printJson(await call(await client(values), 'POST', path, body));
    },
  },
  'webhooks delete': {
    usage: usage.delete,
    summary: 'delete a webhook; its undelivered events are dropped',
    options: jsonOptions,
    async run(values, [sync, webhook]) {
      printJson(await call(await client(values), 'DELETE', webhookPath(sync, webhook, usage.delete)));
    },
  },
  'webhooks deliveries': {
    usage: usage.deliveries,
    summary: "list a webhook's deliveries that needed more than one attempt, oldest first, a page at a time",
    details: `
  --status STATUS  only pending, retrying, exhausted or delivered ones
  --after ID       the page after this delivery id (the last one listed)
  --limit N        at most N (1 to 1000, default 100)
  When more follow, the command for the next page is said on stderr.
`,
    options: { ...jsonOptions, status: { type: 'string' }, after: { type: 'string' }, limit: { type: 'string' } },
    async run(values, [sync, webhook]) {
      const path = `${webhookPath(sync, webhook, usage.deliveries)}/deliveries`;
      const query = new URLSearchParams();
      for (const name of ['status', 'after', 'limit'] as const) if (typeof values[name] === 'string') query.set(name, values[name] as string);
      const answer = (await call(await client(values), 'GET', query.size > 0 ? `${path}?${query}` : path)) as {
        data: Array<{ id: string }>;
        has_more: boolean;
      };
      printList(answer, deliveryColumns, values.json === true);
      const last = answer.data.at(-1);
      if (answer.has_more && last && values.json !== true) {
        query.set('after', last.id);
        const flags = [...query].map(([name, value]) => `--${name} ${value}`).join(' ');
        process.stderr.write(`more follow: tributary webhooks deliveries ${sync} ${webhook} ${flags}\n`);
      }
    },
  },
  'webhooks replay': {
    usage: usage.replay,
    summary: "send a webhook's exhausted deliveries again (all of them, or those named with --id)",
    options: { ...jsonOptions, id: { type: 'string', multiple: true } },
    async run(values, [sync, webhook]) {
      const path = `${webhookPath(sync, webhook, usage.replay)}/deliveries/replay`;
      const ids = listOf(values.id);
      printJson(await call(await client(values), 'POST', path, ids.length > 0 ? { ids } : undefined));
    },
  },
};
