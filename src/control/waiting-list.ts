import type pg from 'pg';

/** An account's place on a kind's waiting list: waiting since `askedAt`, or admitted. */
export interface WaitingListEntry {
  accountId: string;
  accountName: string;
  kind: string;
  askedAt: Date;
  admittedAt: Date | null;
}

interface EntryRow {
  account_id: string;
  account_name: string;
  kind: string;
  asked_at: Date;
  admitted_at: Date | null;
}

const toEntry = (row: EntryRow): WaitingListEntry => ({
  accountId: row.account_id,
  accountName: row.account_name,
  kind: row.kind,
  askedAt: row.asked_at,
  admittedAt: row.admitted_at,
});

const SELECT = `SELECT w.account_id, a.name AS account_name, w.kind, w.asked_at, w.admitted_at
  FROM waiting_list w JOIN accounts a ON a.id = w.account_id`;

/**
 * The waiting lists of the kinds an operator keeps behind one (sql/35_waiting_list.sql). The
 * core knows the kinds only by name: which ones are listed is configuration.
 */
export class WaitingList {
  constructor(
    private readonly pool: pg.Pool,
    /** Kinds behind a waiting list (Config.waitingListKinds); every other kind is open. */
    readonly kinds: readonly string[],
  ) {}

  listed(kind: string): boolean {
    return this.kinds.includes(kind);
  }

  /**
   * Whether the account may make a sync of `kind` now: always for an open kind; else only once
   * admitted. An account not admitted is put on the list (its first ask is kept), and the
   * answer is its entry.
   */
  async askToCreate(accountId: string, kind: string): Promise<{ admitted: true } | { admitted: false; entry: WaitingListEntry }> {
    if (!this.listed(kind)) return { admitted: true };
    const entry = await this.join(accountId, kind);
    return entry.admittedAt ? { admitted: true } : { admitted: false, entry };
  }

  /** Puts the account on the list (a second ask keeps the first one's time); its entry. */
  async join(accountId: string, kind: string): Promise<WaitingListEntry> {
    await this.pool.query('INSERT INTO waiting_list (account_id, kind) VALUES ($1, $2) ON CONFLICT DO NOTHING', [accountId, kind]);
    return (await this.entry(accountId, kind))!;
  }

  async entry(accountId: string, kind: string): Promise<WaitingListEntry | undefined> {
    const { rows } = await this.pool.query<EntryRow>(`${SELECT} WHERE w.account_id = $1 AND w.kind = $2`, [accountId, kind]);
    return rows[0] && toEntry(rows[0]);
  }

  /** Entries, oldest ask first; of one kind, one account, or waiting or admitted ones only. */
  async list(filter: { kind?: string; accountId?: string; state?: 'waiting' | 'admitted' } = {}): Promise<WaitingListEntry[]> {
    const { rows } = await this.pool.query<EntryRow>(
      `${SELECT} WHERE ($1::text IS NULL OR w.kind = $1) AND ($2::text IS NULL OR w.account_id = $2)
         AND ($3::text IS NULL OR ($3 = 'admitted') = (w.admitted_at IS NOT NULL))
       ORDER BY w.asked_at, w.account_id LIMIT 10000`,
      [filter.kind ?? null, filter.accountId ?? null, filter.state ?? null],
    );
    return rows.map(toEntry);
  }

  /** The operator admits an account, on the list or not; undefined when there is no such account. */
  async admitByOperator(accountId: string, kind: string): Promise<WaitingListEntry | undefined> {
    const { rowCount } = await this.pool.query(
      `INSERT INTO waiting_list (account_id, kind, admitted_at) SELECT id, $2, now() FROM accounts WHERE id = $1
       ON CONFLICT (kind, account_id) DO UPDATE SET admitted_at = COALESCE(waiting_list.admitted_at, now())`,
      [accountId, kind],
    );
    return rowCount ? this.entry(accountId, kind) : undefined;
  }

  /** Takes the account off the list, admitted or waiting (its syncs stay); false when it was not on it. */
  async remove(accountId: string, kind: string): Promise<boolean> {
    const { rowCount } = await this.pool.query('DELETE FROM waiting_list WHERE account_id = $1 AND kind = $2', [accountId, kind]);
    return (rowCount ?? 0) > 0;
  }
}
