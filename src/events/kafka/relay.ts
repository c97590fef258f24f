import type pg from 'pg';
import { type Backoff, FailureCount } from '../../retry.ts';
import { toError } from '../../errors.ts';
import type { Logger } from '../../log.ts';
import type { EventBus } from '../bus.ts';
import { type EventLogReader, isFor, type LoggedEvent } from '../log.ts';
import { kafkaTopicName } from './config.ts';
import { advanceRelayCursor, loadRelayCursor } from './cursor.ts';
import { kafkaErrorTypes, type KafkaPublisher, type OutgoingBatch } from './publisher.ts';

/** The Kafka header that carries an event's idempotency key. */
export const EVENT_ID_HEADER = 'svc-event-id';

export interface KafkaRelayOptions {
  /** The control database: the event log and the relay's cursor. */
  pool: pg.Pool;
  syncId: string;
  reader: EventLogReader;
  bus: EventBus;
  /** The process's shared publisher (createKafkaPublisher). */
  kafka: KafkaPublisher;
  logger: Logger;
  signal?: AbortSignal;
  /** Events read from the log at once, and sent in one request at most (default 500). */
  batchSize?: number;
  /** Events read ahead of the send in flight, at most (default 4 × batchSize). */
  readAhead?: number;
  /** The least time between two cursor writes (ms, default 100): rounds acknowledged meanwhile share one write. */
  cursorEveryMs?: number;
  /** Upper bound on keys + values sent in one request (default 512 KiB), below the broker's 1 MiB default. */
  maxBatchBytes?: number;
  /** Without a wakeup, the log is read again after this long anyway (ms, default 5000). */
  idleWaitMs?: number;
  /** Back-off between attempts after a failure: from `initialMs`, doubling, up to `maxMs`, with jitter. */
  retry?: { initialMs?: number; maxMs?: number };
  /** Called after each round that Kafka acknowledged, before the cursor covers it (metrics: lag, throughput). */
  onRelayed?: (events: LoggedEvent[]) => void;
}

export interface KafkaRelay {
  /** Stops after the round in flight; what Kafka has not acknowledged is sent again by the next relay. */
  stop(): Promise<void>;
  /** The seq of the last event Kafka acknowledged and the cursor recorded ('0' before any). */
  relayedSeq(): string;
}

/**
 * Publishes a sync's event log to Kafka, in seq order, for as long as it runs:
 * topic = the event's topic (created on demand with the log's partition count), partition =
 * the log's partition, key = record id, value = the event JSON, header `svc-event-id` = the
 * idempotency key.
 *
 * Ordering rules, enforced here: the log is read ahead in seq order while one round is sent
 * (never two sends of one sync in flight); the cursor moves only after the broker acknowledged
 * every message of the round; a failed send is retried, the same round, forever (with back-off).
 * So nothing is skipped and per-partition order holds; a resend after an ambiguous failure
 * may write an event twice (at-least-once), with the same `svc-event-id`.
 *
 * Run one relay per sync in the whole deployment (next to the sync's decoder, under its
 * lease); a second one would only duplicate, as the cursor never moves backwards.
 */
export function startKafkaRelay(options: KafkaRelayOptions): KafkaRelay {
  const controller = new AbortController();
  const onAbort = () => controller.abort();
  options.signal?.addEventListener('abort', onAbort, { once: true });
  if (options.signal?.aborted) controller.abort();
  const state = { seq: '0' };
  const logger = options.logger.child({ part: 'kafka-relay', sync: options.syncId });
  const done = runRelay(options, logger, controller.signal, state).catch((error: unknown) => {
    // runRelay retries everything itself; reaching here is a bug worth shouting about.
    logger.error({ err: toError(error) }, 'Kafka relay stopped unexpectedly');
  });
  return {
    async stop() {
      controller.abort();
      options.signal?.removeEventListener('abort', onAbort);
      await done;
    },
    relayedSeq: () => state.seq,
  };
}

async function runRelay(options: KafkaRelayOptions, logger: Logger, outer: AbortSignal, state: { seq: string }): Promise<void> {
  const { pool, syncId, reader, bus, kafka } = options;
  // Stopping, or either loop failing, stops both loops.
  const controller = new AbortController();
  const signal = controller.signal;
  const onAbort = () => controller.abort();
  outer.addEventListener('abort', onAbort, { once: true });
  if (outer.aborted) controller.abort();
  const batchSize = options.batchSize ?? 500;
  const maxBatchBytes = options.maxBatchBytes ?? 512 * 1024;
  const readAhead = Math.max(batchSize, options.readAhead ?? 4 * batchSize);
  const cursorEveryMs = options.cursorEveryMs ?? 100;
  const backoff = new FailureCount(relayBackoff(options));
  const partitionsOf = new Map<string, number>();

  const cursor = await retrying(signal, backoff, logger, 'reading the Kafka relay cursor', () => loadRelayCursor(pool, syncId));
  if (cursor === undefined) return;
  state.seq = cursor;
  logger.info({ seq: cursor }, 'Kafka relay started');

  // Two loops. The reader reads the log ahead of the sender, in seq order, into `ahead`
  // (bounded by readAhead), so the sender never waits for a read: whatever was logged while
  // a send was in flight goes out in the next request the moment the broker acknowledges.
  // The sender takes rounds from the front of `ahead`, one send in flight at a time.
  const ahead: LoggedEvent[] = [];
  const arrived = new Wakeup();
  const taken = new Wakeup();
  signal.addEventListener(
    'abort',
    () => {
      arrived.wake();
      taken.wake();
    },
    { once: true },
  );

  const readBackoff = new FailureCount(relayBackoff(options));
  // What the decoder in this process commits arrives here without a read of the log.
  const feed = bus.subscribeLogged(syncId, readAhead);
  signal.addEventListener('abort', () => feed.close(), { once: true });
  const readLoop = async () => {
    let readSeq = cursor;
    // After a wait that timed out, the log is read whatever the feed says (a safety net).
    let readLog = true;
    while (!signal.aborted) {
      if (ahead.length >= readAhead) {
        await taken.wait();
        continue;
      }
      // Taken before the read, so that events logged between the read and the wait wake us.
      const mark = bus.mark(syncId);
      const limit = Math.min(batchSize, readAhead - ahead.length);
      const fed = readLog ? undefined : feed.take(BigInt(readSeq), limit);
      const read =
        fed === 'caught-up'
          ? []
          : (fed ?? (await retrying(signal, readBackoff, logger, 'reading the event log', () => reader.bySeq(syncId, readSeq, { limit }))));
      if (read === undefined) return;
      readLog = false;
      if (read.length === 0) {
        readLog = !(await bus.changedSince(syncId, mark, options.idleWaitMs ?? 5_000, signal));
        continue;
      }
      if (BigInt(read[0]!.seq) !== BigInt(readSeq) + 1n) {
        // Seqs are consecutive per sync: a gap means retention dropped events this relay never sent.
        logger.error({ after: readSeq, next: read[0]!.seq }, 'events expired from the log before they reached Kafka');
      }
      // A backfill's reads for one webhook destination are not Kafka's.
      for (const event of read) if (isFor(event)) ahead.push(event);
      readSeq = read[read.length - 1]!.seq;
      arrived.wake();
    }
  };

  // `sent`: the last seq Kafka acknowledged. Cursor writes run beside the sends, one at a
  // time and at most every cursorEveryMs, each for the latest acknowledged seq: a slow control
  // database never holds up publishing, and a round does not cost a commit of its own. The
  // cursor lags `sent` by about cursorEveryMs; a crash resends that much (at-least-once).
  let sent = cursor;
  const saveBackoff = new FailureCount(relayBackoff(options));
  let saving: Promise<void> = Promise.resolve();
  let saveWanted: string | undefined;
  let saveRunning = false;
  const save = async (seq: string) => {
    const stored = await retrying(signal, saveBackoff, logger, 'saving the Kafka relay cursor', () => advanceRelayCursor(pool, syncId, seq));
    if (stored !== undefined) state.seq = BigInt(stored) > BigInt(seq) ? stored : seq;
  };
  const saveLater = (seq: string) => {
    saveWanted = seq;
    if (saveRunning) return;
    saveRunning = true;
    saving = (async () => {
      while (saveWanted !== undefined && !signal.aborted) {
        const next = saveWanted;
        saveWanted = undefined;
        const started = Date.now();
        await save(next);
        await sleep(cursorEveryMs - (Date.now() - started), signal);
      }
      saveRunning = false;
    })();
  };

  const sendLoop = async () => {
    while (!signal.aborted) {
      if (ahead.length === 0) {
        await arrived.wait();
        continue;
      }
      const round = takeRound(ahead, batchSize, maxBatchBytes);
      const last = round[round.length - 1]!.seq;
      const acked = await retrying(signal, backoff, logger, 'publishing to Kafka', async () => {
        for (const topic of topicsOf(round)) {
          await kafka.ensureTopic(kafkaTopicName(topic), await logPartitions(reader, partitionsOf, topic));
        }
        await kafka.send(toBatches(round));
        return true;
      });
      if (acked === undefined) return;
      // Ordering: the cursor covers a round only once the broker acknowledged all of it.
      ahead.splice(0, round.length);
      taken.wake();
      sent = last;
      logger.trace({ seq: sent, events: round.length }, 'relayed to Kafka');
      try {
        options.onRelayed?.(round);
      } catch (error) {
        logger.warn({ err: toError(error) }, 'onRelayed hook failed');
      }
      saveLater(last);
    }
  };

  let failure: unknown;
  const stopOnFailure = (loop: Promise<void>) =>
    loop.catch((error: unknown) => {
      failure ??= error;
      controller.abort();
    });
  try {
    await Promise.all([stopOnFailure(readLoop()), stopOnFailure(sendLoop())]);
    if (failure !== undefined) throw failure;
  } finally {
    outer.removeEventListener('abort', onAbort);
    await saving;
    // Stopping: record what was acknowledged, so that the next relay does not send it again.
    if (state.seq !== sent) {
      await advanceRelayCursor(pool, syncId, sent).then(
        (stored) => (state.seq = BigInt(stored) > BigInt(sent) ? stored : sent),
        (error: unknown) => logger.warn({ err: toError(error) }, 'could not save the Kafka relay cursor when stopping'),
      );
    }
  }
}

/** A wakeup for the relay's two loops; wait() registers at once, so a wake after a check is not missed. */
class Wakeup {
  private waiters: Array<() => void> = [];
  wake(): void {
    if (this.waiters.length === 0) return;
    const waiters = this.waiters;
    this.waiters = [];
    for (const resolve of waiters) resolve();
  }
  wait(): Promise<void> {
    return new Promise((resolve) => this.waiters.push(resolve));
  }
}

/** The distinct topics of a round, in order of first appearance. */
function topicsOf(events: LoggedEvent[]): string[] {
  const topics: string[] = [];
  let previous: string | undefined;
  for (const e of events) {
    if (e.topic === previous) continue;
    previous = e.topic;
    if (!topics.includes(e.topic)) topics.push(e.topic);
  }
  return topics;
}

/** The log's partition count of a topic: the Kafka topic gets as many, so partitions map one to one. */
async function logPartitions(reader: EventLogReader, cache: Map<string, number>, topic: string): Promise<number> {
  let partitions = cache.get(topic);
  if (partitions === undefined) {
    const info = await reader.topic(topic);
    if (!info) throw new Error(`topic ${topic} has events but no row in event_topics`);
    partitions = info.partitions;
    cache.set(topic, partitions);
  }
  return partitions;
}

/** The longest prefix of `events`, at most `maxEvents`, within `maxBytes` (always at least one event). */
function takeRound(events: LoggedEvent[], maxEvents: number, maxBytes: number): LoggedEvent[] {
  let bytes = 0;
  const n = Math.min(events.length, maxEvents);
  for (let i = 0; i < n; i++) {
    const e = events[i]!;
    bytes += Buffer.byteLength(e.value) + Buffer.byteLength(e.recordId) + Buffer.byteLength(e.eventKey) + 64;
    if (bytes > maxBytes && i > 0) return events.slice(0, i);
  }
  return events.slice(0, n);
}

/** Groups a round by topic, keeping log order within each topic (and so within each partition). */
export function toBatches(events: LoggedEvent[]): OutgoingBatch[] {
  const byTopic = new Map<string, OutgoingBatch>();
  for (const e of events) {
    let batch = byTopic.get(e.topic);
    if (!batch) {
      batch = { topic: kafkaTopicName(e.topic), messages: [] };
      byTopic.set(e.topic, batch);
    }
    batch.messages.push({ partition: e.partition, key: e.recordId, value: e.value, headers: { [EVENT_ID_HEADER]: e.eventKey } });
  }
  return [...byTopic.values()];
}

/**
 * Runs `work` until it succeeds, with back-off between failures, or until `signal` aborts
 * (then undefined). Logs the first failure and every tenth after it, and the recovery.
 */
async function retrying<T>(signal: AbortSignal, backoff: FailureCount, logger: Logger, what: string, work: () => Promise<T>): Promise<T | undefined> {
  for (let attempt = 1; !signal.aborted; attempt++) {
    try {
      const result = await raceAbort(work(), signal);
      if (result === ABORTED) return undefined;
      if (attempt > 1) logger.info({ attempts: attempt }, `${what}: recovered`);
      backoff.reset();
      return result;
    } catch (thrown) {
      if (signal.aborted) return undefined;
      const err = toError(thrown);
      if (attempt === 1 || attempt % 10 === 0) {
        logger.warn({ err, kafkaErrors: kafkaErrorTypes(err), attempt }, `${what} failed; retrying`);
      }
      await sleep(backoff.next(), signal);
    }
  }
  return undefined;
}

/** The relay's back-off: 100 ms doubling to 10 s, in the upper half so relays of many syncs do not retry in lockstep. */
function relayBackoff(options: KafkaRelayOptions): Backoff {
  return { initialMs: options.retry?.initialMs ?? 100, maxMs: options.retry?.maxMs ?? 10_000, jitter: 'upper' };
}

const ABORTED = Symbol('aborted');

/**
 * Stops waiting for `work` when `signal` aborts. The work itself may still finish in the
 * background; nothing depends on it then (the cursor only moves after a completed await).
 */
function raceAbort<T>(work: Promise<T>, signal: AbortSignal): Promise<T | typeof ABORTED> {
  if (signal.aborted) {
    work.catch(() => undefined);
    return Promise.resolve(ABORTED);
  }
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      work.catch(() => undefined);
      resolve(ABORTED);
    };
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted || ms <= 0) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}
