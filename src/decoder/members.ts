import type pg from 'pg';
import { EventAppender } from '../events/append.ts';
import type { EventBus } from '../events/bus.ts';
import type { CollectionRules } from './events.ts';
import { lsnToBigInt } from './pgoutput.ts';

/** A sync whose tables are in the decoder's database, in schema `schema`. */
export interface DecoderMember {
  syncId: string;
  accountId: string;
  schema: string;
  rules: CollectionRules;
}

/** A member as the running decoder keeps it: its log writer and the last commit logged for it. */
export interface Member extends DecoderMember {
  appender: EventAppender;
  loggedCommit: bigint;
}

export interface MembersOptions {
  control: pg.Pool;
  bus?: EventBus;
  partitions?: number;
  /** The sync that made the database: always a member, its schema `public`, its tables' rules `rules`. */
  syncId: string;
  accountId: string;
  rules: CollectionRules;
  /** Every active sync of the database (the first among them); absent: the first alone. */
  members?: () => Promise<DecoderMember[]>;
  /** Told the members' ids after each load or refresh (what runs beside the decoder follows them). */
  onMembers?: (syncIds: string[]) => void;
}

/**
 * The syncs one decoder serves: one slot per database, and each schema's changes are the
 * events of the sync whose schema it is. Each member has its own log position (its
 * decoder_progress row), so a batch that was logged for one member and failed for another is
 * logged again only for the other.
 */
export class DecoderMembers {
  private bySchema = new Map<string, Member>();
  private readonly firstMember: DecoderMember;

  constructor(private readonly options: MembersOptions) {
    this.firstMember = { syncId: options.syncId, accountId: options.accountId, schema: 'public', rules: options.rules };
  }

  /** At a session's start: every member and where its log stands. */
  async load(): Promise<void> {
    this.bySchema = new Map();
    for (const listed of await this.listed()) await this.add(listed);
    this.options.onMembers?.(this.all().map((m) => m.syncId));
  }

  /**
   * Asks the control database again: a sync that joined since gets its place, one deleted
   * loses it, and a schema that changed hands (a sync deleted, another made with its name)
   * is the new sync's. Called for a table of a schema other than the first's.
   */
  async refresh(): Promise<void> {
    const listed = await this.listed();
    const ids = new Set(listed.map((m) => m.syncId));
    for (const [schema, member] of this.bySchema) if (!ids.has(member.syncId)) this.bySchema.delete(schema);
    for (const member of listed) if (this.bySchema.get(member.schema)?.syncId !== member.syncId) await this.add(member);
    this.options.onMembers?.(this.all().map((m) => m.syncId));
  }

  get first(): Member {
    const first = this.bySchema.get(this.firstMember.schema);
    if (!first) throw new Error('decoder: members not loaded');
    return first;
  }

  of(schema: string): Member | undefined {
    return this.bySchema.get(schema);
  }

  all(): Member[] {
    return [...this.bySchema.values()];
  }

  private async listed(): Promise<DecoderMember[]> {
    const listed = (await this.options.members?.()) ?? [];
    const first = this.firstMember;
    return listed.some((m) => m.syncId === first.syncId) ? listed : [first, ...listed.filter((m) => m.schema !== first.schema)];
  }

  private async add(member: DecoderMember): Promise<void> {
    const appender = new EventAppender({ pool: this.options.control, syncId: member.syncId, accountId: member.accountId, partitions: this.options.partitions });
    const progress = await appender.load();
    // A write that failed may have committed after all: readers must not trust what they were handed before.
    this.options.bus?.forgetLogged(member.syncId);
    this.bySchema.set(member.schema, { ...member, appender, loggedCommit: lsnToBigInt(progress.lsn) });
  }
}
