import { waitForBackfill } from './backfill-wait.ts';
import { call } from './client.ts';
import { client, type Command, jsonOptions, listOf, required, UsageError } from './command.ts';
import { type BackfillRow, backfillColumns, printJson, printList } from './lists.ts';

const backfillsPath = (sync: string | undefined, command: string) => {
  const id = required(sync, `name the sync: tributary backfills ${command} SYNC_ID${command === 'list' || command === 'start' ? '' : ' BACKFILL_ID'}`);
  return `/api/syncs/${encodeURIComponent(id)}/backfills`;
};

const backfillPath = (sync: string | undefined, backfill: string | undefined, command: string) => {
  const base = backfillsPath(sync, command);
  return `${base}/${encodeURIComponent(required(backfill, `name the backfill: tributary backfills ${command} SYNC_ID BACKFILL_ID`))}`;
};

/** Backfills on demand (docs/events.md): a sync's current rows sent into the event stream as reads. */
export const backfillCommands: Record<string, Command> = {
  'backfills list': {
    usage: 'tributary backfills list SYNC_ID [--json]',
    summary: "list a sync's backfills, newest first: id, state, rows read, the collection being read",
    options: jsonOptions,
    async run(values, [sync]) {
      printList(await call(await client(values), 'GET', backfillsPath(sync, 'list')), backfillColumns, values.json === true);
    },
  },
  'backfills show': {
    usage: 'tributary backfills show SYNC_ID BACKFILL_ID',
    summary: 'show one backfill: its state, rows read so far, the collection being read, why it failed',
    options: jsonOptions,
    async run(values, [sync, backfill]) {
      printJson(await call(await client(values), 'GET', backfillPath(sync, backfill, 'show')));
    },
  },
  'backfills start': {
    usage: 'tributary backfills start SYNC_ID [--collection NAME ...] [--webhook wh_…] [--wait [--interval SECONDS]]',
    summary: "send a sync's current rows into the event stream as read events (every collection by default)",
    details: `
  --collection NAME  a collection to read (the last part of its topic, svc.SYNC_ID.NAME);
                     repeat it for more; without it, every collection of the sync (or of the webhook)
  --webhook wh_…     send the reads to this webhook alone, not to the topics' consumers
  --wait             follow the backfill until it finishes: a progress line on stderr (redrawn
                     on a terminal, one per change in a log), then its final JSON on stdout;
                     exit 0 when done, 1 when it failed or was canceled, 130 on Ctrl-C (the
                     backfill goes on)
  --interval SECONDS how often --wait asks (default 1)
`,
    options: {
      ...jsonOptions,
      collection: { type: 'string', multiple: true },
      webhook: { type: 'string' },
      wait: { type: 'boolean' },
      interval: { type: 'string' },
    },
    async run(values, [sync]) {
      const path = backfillsPath(sync, 'start');
      const interval = values.interval === undefined ? 1 : Number(values.interval);
      if (!(interval > 0)) throw new UsageError('--interval takes a number of seconds above 0');
      if (values.interval !== undefined && !values.wait) throw new UsageError('--interval goes with --wait');
      const collections = listOf(values.collection);
      const body: Record<string, unknown> = {};
      if (collections.length > 0) body.collections = collections;
      if (typeof values.webhook === 'string') body.webhook = values.webhook;
      const options = await client(values);
      const started = (await call(options, 'POST', path, body)) as BackfillRow;
      if (!values.wait) return void printJson(started);
      // Ctrl-C ends the wait, not the backfill: the line is closed, the exit is 130.
      const interrupt = new AbortController();
      const onInterrupt = () => interrupt.abort();
      process.once('SIGINT', onInterrupt);
      let finished: BackfillRow;
      try {
        finished = await waitForBackfill({
          client: { ...options, signal: interrupt.signal },
          syncId: sync!,
          id: started.id,
          intervalMs: interval * 1000,
          out: process.stderr,
        });
      } catch (error) {
        if (!interrupt.signal.aborted) throw error;
        process.stderr.write(`backfill ${started.id} goes on; stop it with: tributary backfills cancel ${sync} ${started.id}\n`);
        return 130;
      } finally {
        process.off('SIGINT', onInterrupt);
      }
      printJson(finished);
      if (finished.state === 'failed') throw new Error(`backfill ${finished.id} failed: ${finished.error ?? 'no reason given'}`);
      if (finished.state !== 'done') throw new Error(`backfill ${finished.id} was ${finished.state}`);
    },
  },
  'backfills cancel': {
    usage: 'tributary backfills cancel SYNC_ID BACKFILL_ID',
    summary: 'cancel a running backfill: it stops before its next chunk; the reads already sent stay in the stream',
    options: jsonOptions,
    async run(values, [sync, backfill]) {
      printJson(await call(await client(values), 'DELETE', backfillPath(sync, backfill, 'cancel')));
    },
  },
};
