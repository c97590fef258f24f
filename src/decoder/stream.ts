import { PUBLICATION } from '../control/provisioner.ts';
import { ident } from '../db/sql.ts';
import { toError } from '../errors.ts';
import type { NewEvent } from '../events/append.ts';
import { MESSAGE_PREFIX } from '../db/messages.ts';
import { FailureCount } from '../retry.ts';
import { rowEvent, type TableInfo, tableInfo } from './events.ts';
import { transactionalMessage } from './transactional-messages.ts';
import { lsnToBigInt, type PgoutputMessage, PgoutputParser, type RawValue } from './pgoutput.ts';
import { SlotLagReport } from './lag.ts';
import { ReplicationStream } from './replication.ts';
import { endStaleSession } from './stale-session.ts';
import { markReached } from './wait.ts';
import { DecoderMembers, type Member } from './members.ts';
import type { DecoderOptions, OpenTransaction } from './decoder-options.ts';
import { logUnlessDeleted } from '../sync/routine-failure.ts';
import { SlotRecovery } from './slot-recovery.ts';

export type { DecoderOptions };

/** Log batches written at once (see flush). */
const MAX_IN_FLIGHT = 2;
/** The least time between two reports of the durable position to the slot (see acknowledge). */
const ACK_EVERY_MS = 50;
/** Replication session settings: column text in one format, the one swap.ts also uses. */
const SESSION = '-c TimeZone=UTC -c DateStyle=ISO,MDY -c IntervalStyle=postgres -c extra_float_digits=1';

/**
 * Reads one sync database's WAL through its slot (pgoutput) and logs every committed row
 * change as an event of the sync whose schema holds the table (members.ts: a database that
 * several syncs share has one slot, one walsender and one decoder). The ordering rule: log
 * the events, then tell the slot.
 * The slot is acknowledged only up to transactions whose events are durable, so after a
 * crash the server sends them again, and the log's progress row says which of them are
 * already in (their events are skipped, not duplicated).
 */
export class Decoder {
  private readonly members: DecoderMembers;
  private readonly parser = new PgoutputParser();
  private readonly tables = new Map<number, { info: TableInfo; member: Member }>();
  private readonly readInfos = new Map<string, TableInfo | undefined>();
  private replication: ReplicationStream | undefined;
  private stopped = false;
  private running: Promise<void> | undefined;
  private wake: (() => void) | undefined;
  /** Ends the current session's wait on the replication stream (see stream()). */
  private stopStream: (() => void) | undefined;

  private txn: OpenTransaction | undefined;
  private batch = new Map<Member, NewEvent[]>();
  private batchSize = 0;
  /** Commit and end LSN of the last transaction in `batch` (or skipped since the last flush). */
  private batchCommit: { commitLsn: string; endLsn: string } | undefined;
  private flushing: Promise<void> = Promise.resolve();
  /** The flush before the latest: what a full batch waits for. */
  private previousFlush: Promise<void> = Promise.resolve();
  private inFlight = 0;
  private flushTimer: NodeJS.Timeout | undefined;
  private loggedCommit = 0n;
  private ackedLsn = '0/0';
  private ackSentAt = 0;
  private ackTimer: NodeJS.Timeout | undefined;
  /** XLogData messages handled, to know when a keepalive's position is safe to confirm. */
  private handled = 0;
  private idleCandidate: { lsn: string; upTo: number } | undefined;
  /** The server process of a session given up as hung (stale-session.ts). */
  private stalePid: number | undefined;

  private readonly lag: SlotLagReport;
  private readonly recovery: SlotRecovery;

  constructor(private readonly options: DecoderOptions) {
    this.members = new DecoderMembers(options);
    this.lag = new SlotLagReport(options);
    this.recovery = new SlotRecovery(options);
  }

  start(): void {
    this.running = this.loop();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.wake?.();
    this.stopStream?.();
    await this.replication?.stop();
    await this.running;
    await this.lag.close();
  }

  /** The position the slot has been told; everything before it is in the event log. */
  get acknowledged(): string {
    return this.ackedLsn;
  }

  private async loop(): Promise<void> {
    // A session that logged something starts the back-off over; a server away is asked ever less often.
    const failures = new FailureCount({ initialMs: this.options.retryMs ?? 1000, maxMs: 10 * (this.options.retryMs ?? 1000) });
    const active = this.options.active ?? (async () => true);
    while (!this.stopped) {
      const before = this.loggedCommit;
      try {
        await this.stream();
      } catch (error) {
        if (this.stopped) break;
        await logUnlessDeleted(active, this.options.logger)(error, 'decoder stream failed; resuming from the slot');
        // A lost slot never streams again: it is replaced and the gap marked (slot-recovery.ts).
        if (await this.recovery.afterFailure(this.members.all(), active)) failures.reset();
      }
      if (this.stopped) break;
      if (this.loggedCommit !== before) failures.reset();
      const delay = failures.next();
      await new Promise<void>((resolve) => {
        this.wake = resolve;
        setTimeout(resolve, delay);
      });
    }
  }

  /** One replication session, from the slot's confirmed position to an error or stop(). */
  private async stream(): Promise<void> {
    await this.members.load();
    await this.recovery.markPending(this.members.all());
    this.loggedCommit = this.members.first.loggedCommit;
    this.tables.clear();
    this.readInfos.clear();
    this.txn = undefined;
    this.batch = new Map();
    this.batchSize = 0;
    this.batchCommit = undefined;
    this.handled = 0;
    this.idleCandidate = undefined;
    this.flushing = Promise.resolve();
    this.previousFlush = Promise.resolve();
    this.inFlight = 0;

    // A session given up as hung may still hold the slot from the server's side.
    if (this.stalePid !== undefined) {
      await endStaleSession(this.options, this.stalePid);
      this.options.logger.info({ sync: this.options.syncId, pid: this.stalePid }, 'ended the hung session still holding the slot');
      this.stalePid = undefined;
    }
    const replication = new ReplicationStream({
      databaseUrl: this.options.databaseUrl,
      before: await this.recovery.failoverSetup(),
      options: SESSION,
      // 0/0: the server starts at the slot's confirmed position.
      silenceMs: this.options.silenceMs,
      command: `START_REPLICATION SLOT ${ident(this.options.slot)} LOGICAL 0/0 (proto_version '1', publication_names '${PUBLICATION}', messages 'true')`,
      handlers: {
        data: (payload) => {
          if (replication.arrived === 1) this.options.logger.debug({ sync: this.options.syncId }, 'decoder session streaming: its first change arrived');
          return this.handle(this.parser.parse(payload));
        },
        keepalive: (lsn, replyRequested) => {
          this.idleCandidate = { lsn, upTo: replication.arrived };
          if (!this.confirmIdle() && replyRequested) void this.acknowledge(this.ackedLsn);
        },
      },
    });
    this.replication = replication;
    // How far the server's WAL is ahead of what the slot was told, for status and metrics.
    const members = () => this.members.all().map((m) => m.syncId);
    const reportLag = () =>
      this.lag.report(members(), this.ackedLsn).catch((err: unknown) => this.options.logger.debug({ err: toError(err) }, 'could not read the slot lag'));
    const lagTimer = setInterval(() => void reportLag(), this.options.lagReportMs ?? 5000);
    // A stop while the session is still connecting must not wait on it: pg's connect() never
    // settles once end() was called during it. So the session also ends on stop().
    const stopping = new Promise<void>((resolve) => (this.stopStream = resolve));
    try {
      if (this.stopped) return;
      this.options.logger.debug({ sync: this.options.syncId, slot: this.options.slot, from: String(this.loggedCommit) }, 'decoder session starting');
      const running = replication.run();
      running.catch(() => undefined); // settled late, after a stop: nothing waits for it
      await Promise.race([running, stopping]);
    } finally {
      clearInterval(lagTimer);
      clearTimeout(this.flushTimer);
      this.flushTimer = undefined;
      await replication.stop();
      if (replication.silent) this.stalePid = replication.backendPid;
      await this.flushing.catch(() => undefined);
      clearTimeout(this.ackTimer);
      this.ackTimer = undefined;
    }
  }

  /** Called in WAL order, one message at a time; a returned promise holds the stream back. */
  private handle(message: PgoutputMessage): Promise<void> | undefined {
    this.handled++;
    switch (message.tag) {
      case 'begin':
        this.txn = { commitLsn: message.finalLsn, commit: lsnToBigInt(message.finalLsn), position: 0, events: [] };
        return undefined;
      case 'relation':
        // A table of another sync's schema: ask who holds the schema now (one may have joined).
        if (message.relation.schema !== 'public') return this.members.refresh().then(() => this.relate(message.relation));
        this.relate(message.relation);
        return undefined;
      case 'insert':
        this.rowChange('inserted', message.relation.oid, undefined, message.next);
        return undefined;
      case 'update':
        this.rowChange('updated', message.relation.oid, message.prior, message.next);
        return undefined;
      case 'delete':
        this.rowChange('deleted', message.relation.oid, message.prior, undefined);
        return undefined;
      case 'message':
        if (message.transactional)
          return (
            this.txn &&
            transactionalMessage(
              { txn: this.txn, members: this.members, meta: (txn, member) => this.meta(txn, member), readInfos: this.readInfos },
              message.prefix,
              message.content,
            )
          );
        if (message.prefix === MESSAGE_PREFIX.wait) return this.waitReached(message.content);
        return undefined;
      case 'commit':
        return this.commit(message.commitLsn, message.endLsn);
      default:
        this.confirmIdle();
        return undefined;
    }
  }

  /** A table's collection rules are those of the sync whose schema holds it. */
  private relate(relation: Parameters<typeof tableInfo>[0] & { oid: number }): void {
    const member = this.members.of(relation.schema);
    const info = member && tableInfo(relation, member.rules, member.schema);
    if (member && info) this.tables.set(relation.oid, { info, member });
    else this.tables.delete(relation.oid);
  }

  private meta(txn: OpenTransaction, member: Member) {
    const position = txn.position++;
    if (!txn.createdAt) {
      const at = this.options.now?.() ?? new Date();
      txn.createdAt = { at, text: at.toISOString() };
    }
    return { eventKey: `${member.syncId}.${txn.commitLsn}.${position}`, createdAt: txn.createdAt.at, createdAtText: txn.createdAt.text };
  }

  private rowChange(kind: 'inserted' | 'updated' | 'deleted', oid: number, prior: RawValue[] | undefined, next: RawValue[] | undefined): void {
    const txn = this.txn;
    if (!txn) throw new Error('pgoutput: row change outside a transaction');
    const table = this.tables.get(oid);
    if (!table) {
      txn.position++;
      return;
    }
    const meta = this.meta(txn, table.member);
    // Already in this sync's log (a replay after a crash): decoded for its relations only.
    if (txn.commit <= table.member.loggedCommit) return;
    const event = rowEvent(kind, table.info, prior, next, meta);
    if (event) txn.events.push([table.member, event]);
  }

  private commit(commitLsn: string, endLsn: string): Promise<void> | undefined {
    const txn = this.txn;
    this.txn = undefined;
    // Every batch is logged for the first sync too (its position moves): a transaction at or
    // before its position, with nothing left to log for any sync, was logged before.
    if (txn && (txn.events.length > 0 || txn.commit > this.members.first.loggedCommit)) {
      for (const [member, event] of txn.events) {
        let events = this.batch.get(member);
        if (!events) this.batch.set(member, (events = []));
        events.push(event);
      }
      this.batchSize += txn.events.length;
      this.batchCommit = { commitLsn, endLsn };
    } else if (txn) {
      // Replayed and already logged: nothing to write, but the slot may move past it.
      this.chain(() => this.acknowledge(endLsn));
    }
    if (this.batchSize >= (this.options.maxBatch ?? 5000)) {
      // A full batch goes now if it may; the stream waits only while two are in flight.
      if (this.inFlight < MAX_IN_FLIGHT) void this.flush();
      return this.inFlight >= MAX_IN_FLIGHT ? this.previousFlush : undefined;
    }
    if (this.batchCommit && !this.flushTimer && this.inFlight === 0) {
      this.flushTimer = setTimeout(() => {
        this.flushTimer = undefined;
        void this.flush();
      }, this.options.flushMs ?? 1);
    }
    return undefined;
  }

  /**
   * Logs the batch (events and position in one transaction), then tells the slot. Two
   * batches may be in flight: one's COPY overlaps the other's commit, and the appender
   * commits them in order (a later one not at all if an earlier one failed). Whatever
   * gathers meanwhile goes as one batch when a flush ends: under load batches grow, idle
   * they go within flushMs.
   */
  private flush(): Promise<void> {
    if (this.inFlight >= MAX_IN_FLIGHT) return this.previousFlush;
    clearTimeout(this.flushTimer);
    this.flushTimer = undefined;
    const batch = this.batch;
    const upTo = this.batchCommit;
    this.batch = new Map();
    this.batchSize = 0;
    this.batchCommit = undefined;
    if (!upTo) return this.flushing;
    // The first sync's position moves with every batch, events or not.
    if (!batch.has(this.members.first)) batch.set(this.members.first, []);
    const previous = this.flushing;
    this.previousFlush = previous;
    this.inFlight++;
    this.flushing = (async () => {
      const commit = lsnToBigInt(upTo.commitLsn);
      try {
        // One append per sync, each after the whole previous batch; the slot is told only once all are in.
        await Promise.all(
          [...batch].map(async ([member, events]) => {
            const logged = await member.appender.append(events, upTo.commitLsn, previous);
            member.loggedCommit = commit;
            // Readers in this process take the committed events from memory instead of reading them back.
            if (logged.length > 0) this.options.bus?.publishLogged(member.syncId, logged);
          }),
        );
      } finally {
        this.inFlight--;
      }
      this.loggedCommit = commit;
      await this.acknowledge(upTo.endLsn);
      if (this.batchCommit) void this.flush();
      this.confirmIdle();
    })();
    // A failed write ends the session: it resumes from the slot, which was not told of it.
    this.flushing.catch((error: unknown) => this.replication?.fail(toError(error)));
    return this.flushing;
  }

  /**
   * A keepalive's position may be confirmed once every message before it is handled and
   * logged: the WAL between holds nothing for this slot, and confirming it lets the server
   * recycle WAL that other databases wrote.
   */
  private confirmIdle(): boolean {
    const candidate = this.idleCandidate;
    if (!candidate || this.handled < candidate.upTo || this.txn || this.batchCommit || this.batchSize > 0) return false;
    this.idleCandidate = undefined;
    this.chain(() => {
      if (lsnToBigInt(candidate.lsn) > lsnToBigInt(this.ackedLsn)) return this.acknowledge(candidate.lsn);
      return this.acknowledge(this.ackedLsn);
    });
    return true;
  }

  /**
   * Queues `next` after the flushes in flight. A failed flush ends the session (flush() hands
   * it to the stream); a promise chained on it rejects too, and until something awaits it,
   * Node counts that as unhandled and ends the process: found when the control database
   * refused connections (too many clients) and the whole service exited.
   */
  private chain(next: () => Promise<void> | void): void {
    const chained = this.flushing.then(next);
    chained.catch(() => undefined);
    this.flushing = chained;
  }

  /**
   * A wait marker (wait.ts): every transaction that committed before it has been received,
   * so once those are logged, the waiter is told. The stream waits for it: it is rare and quick.
   */
  private async waitReached(token: string): Promise<void> {
    while (this.batchCommit || this.inFlight > 0) {
      if (this.batchCommit) await this.flush();
      await this.flushing;
    }
    await markReached(this.options.control, token);
  }

  /**
   * Tells the slot `lsn` (durable) at once if the last report is ACK_EVERY_MS old, else with
   * the report that follows that long after it. Under load a batch commits every few
   * milliseconds, and a report per batch costs the server more than a slot that moves a
   * little later (a crash then sends a little more again, which the log's position skips).
   */
  private async acknowledge(lsn: string): Promise<void> {
    if (lsnToBigInt(lsn) > lsnToBigInt(this.ackedLsn)) this.ackedLsn = lsn;
    const wait = ACK_EVERY_MS - (Date.now() - this.ackSentAt);
    if (wait > 0) {
      this.ackTimer ??= setTimeout(() => {
        this.ackTimer = undefined;
        void this.acknowledge(this.ackedLsn);
      }, wait);
      return;
    }
    clearTimeout(this.ackTimer);
    this.ackTimer = undefined;
    this.ackSentAt = Date.now();
    this.replication?.acknowledge(this.ackedLsn);
  }
}
