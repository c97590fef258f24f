import type pg from 'pg';
import { newAccountId, newApiToken, newPassword, randomLowerAlnum } from '../ids.ts';
import { hashToken, Secret, type SecretBox } from './secrets.ts';
import { trimOldest } from '../bounded-map.ts';

export interface Account {
  id: string;
  name: string;
  eventsUsername: string;
  createdAt: Date;
  /** Operator limits: syncs the account may have, and connections its readers may hold in all. */
  maxSyncs: number;
  readerConnectionBudget: number;
  /** What the account may store: consumer groups, live instances per group, webhooks in all. */
  maxConsumerGroups: number;
  maxGroupMembers: number;
  maxWebhooks: number;
}

/** The limits the operator sets; an absent one is left as it is. */
export interface AccountLimits {
  maxSyncs?: number | undefined;
  readerConnectionBudget?: number | undefined;
  maxConsumerGroups?: number | undefined;
  maxGroupMembers?: number | undefined;
  maxWebhooks?: number | undefined;
}

export interface NewAccount {
  account: Account;
  apiToken: Secret;
  eventsPassword: Secret;
}

export interface AccountRow {
  id: string;
  name: string;
  events_username: string;
  created_at: Date;
  max_syncs: number;
  reader_connection_budget: number;
  max_consumer_groups: number;
  max_group_members: number;
  max_webhooks: number;
}

export const ACCOUNT_LIMIT_COLUMNS = 'max_syncs, reader_connection_budget, max_consumer_groups, max_group_members, max_webhooks';
const columns = `id, name, events_username, created_at, ${ACCOUNT_LIMIT_COLUMNS}`;
const toAccount = (row: AccountRow): Account => ({
  id: row.id,
  name: row.name,
  eventsUsername: row.events_username,
  createdAt: row.created_at,
  maxSyncs: row.max_syncs,
  readerConnectionBudget: row.reader_connection_budget,
  maxConsumerGroups: row.max_consumer_groups,
  maxGroupMembers: row.max_group_members,
  maxWebhooks: row.max_webhooks,
});

/** An account from a row that holds its columns (joined elsewhere, such as a console session). */
export const accountOfRow = toAccount;

const passwordAad = (accountId: string) => `accounts:${accountId}:events_password`;
/** The row no account has: a username that names no account is checked against its sealed stand-in. */
const NO_ACCOUNT = 'acc_none';

/** How long a token's account is kept in memory: a change of its limits in another process shows this much later. */
const TOKEN_CACHE_MS = 5_000;
const TOKEN_CACHE_MAX = 10_000;

export class AccountStore {
  /** A sealed password of no account, opened in place of a missing one (see eventsCredential). */
  private readonly standIn: string;
  /**
   * Accounts by token digest, briefly: every API request looks its token up, and under one
   * account's flood those lookups were most of what the control database did for it. Only
   * tokens that name an account are kept, so a wrong token costs the same every time.
   */
  private readonly byToken = new Map<string, { account: Account; until: number }>();

  constructor(
    private readonly pool: pg.Pool,
    private readonly box: SecretBox,
  ) {
    this.standIn = box.encrypt(newPassword(), passwordAad(NO_ACCOUNT));
  }

  /** The token and the event password are returned here once; only a hash and a sealed copy are kept. */
  async create(name: string): Promise<NewAccount> {
    const id = newAccountId();
    const apiToken = newApiToken();
    const eventsPassword = newPassword();
    const eventsUsername = `ev_${randomLowerAlnum(12)}`;
    const { rows } = await this.pool.query<AccountRow>(
      `INSERT INTO accounts (id, name, api_token_sha256, events_username, events_password_enc)
       VALUES ($1, $2, $3, $4, $5) RETURNING ${columns}`,
      [id, name, hashToken(apiToken), eventsUsername, this.box.encrypt(eventsPassword, passwordAad(id))],
    );
    return { account: toAccount(rows[0]!), apiToken: new Secret(apiToken), eventsPassword: new Secret(eventsPassword) };
  }

  async findByToken(token: string): Promise<Account | undefined> {
    const digest = hashToken(token);
    const hit = this.byToken.get(digest);
    if (hit && hit.until > Date.now()) return hit.account;
    const { rows } = await this.pool.query<AccountRow>(`SELECT ${columns} FROM accounts WHERE api_token_sha256 = $1`, [digest]);
    const account = rows[0] && toAccount(rows[0]);
    if (account) {
      this.byToken.delete(digest);
      this.byToken.set(digest, { account, until: Date.now() + TOKEN_CACHE_MS });
      trimOldest(this.byToken, TOKEN_CACHE_MAX);
    }
    return account;
  }

  async get(id: string): Promise<Account | undefined> {
    const { rows } = await this.pool.query<AccountRow>(`SELECT ${columns} FROM accounts WHERE id = $1`, [id]);
    return rows[0] && toAccount(rows[0]);
  }

  async list(): Promise<Account[]> {
    const { rows } = await this.pool.query<AccountRow>(`SELECT ${columns} FROM accounts ORDER BY created_at, id`);
    return rows.map(toAccount);
  }

  /** The operator's limits; undefined for an unknown account. A budget below what readers hold now only stops new ones. */
  async setLimits(id: string, limits: AccountLimits): Promise<Account | undefined> {
    this.byToken.clear();
    const { rows } = await this.pool.query<AccountRow>(
      `UPDATE accounts SET max_syncs = coalesce($2, max_syncs), reader_connection_budget = coalesce($3, reader_connection_budget),
              max_consumer_groups = coalesce($4, max_consumer_groups), max_group_members = coalesce($5, max_group_members),
              max_webhooks = coalesce($6, max_webhooks)
        WHERE id = $1 RETURNING ${columns}`,
      [
        id,
        limits.maxSyncs ?? null,
        limits.readerConnectionBudget ?? null,
        limits.maxConsumerGroups ?? null,
        limits.maxGroupMembers ?? null,
        limits.maxWebhooks ?? null,
      ],
    );
    return rows[0] && toAccount(rows[0]);
  }

  /**
   * The account and event password of an event username, in one query. A username no account
   * has costs the same: a stand-in password is decrypted all the same, so that the time taken
   * does not tell whether the username exists.
   */
  async eventsCredential(username: string): Promise<{ accountId: string; password: Secret } | undefined> {
    const { rows } = await this.pool.query<{ id: string; events_password_enc: string }>(
      'SELECT id, events_password_enc FROM accounts WHERE events_username = $1',
      [username],
    );
    const row = rows[0];
    const password = this.box.decrypt(row?.events_password_enc ?? this.standIn, passwordAad(row?.id ?? NO_ACCOUNT));
    return row && { accountId: row.id, password };
  }

  async eventsPassword(accountId: string): Promise<Secret | undefined> {
    const { rows } = await this.pool.query<{ events_password_enc: string }>('SELECT events_password_enc FROM accounts WHERE id = $1', [accountId]);
    return rows[0] && this.box.decrypt(rows[0].events_password_enc, passwordAad(accountId));
  }
}
