import { randomBytes } from 'node:crypto';
import type pg from 'pg';
import { inTransaction } from '../db/sql.ts';
import { ACCOUNT_LIMIT_COLUMNS, accountOfRow, type Account, type AccountRow } from './accounts.ts';
import { hashToken } from './secrets.ts';

/** A console session ends after this long without a request… */
export const SESSION_IDLE_MS = 12 * 3_600_000;
/** …and in any case this long after sign-in. */
export const SESSION_MAX_MS = 7 * 24 * 3_600_000;
/** Live sessions per account (and for the operator): a sign-in past it ends the least recently used. */
export const MAX_SESSIONS = 20;
/** last_seen_at/expires_at are written at most this often per session. */
const TOUCH_EVERY_MS = 60_000;

export type SessionPrincipal = { kind: 'admin' } | { kind: 'account'; account: Account };

export interface ConsoleSession {
  principal: SessionPrincipal;
  csrfToken: string;
}

/** The session's columns, and its account's (all null for an operator session). */
type SessionRow = {
  account_id: string | null;
  admin_token_sha256: string | null;
  csrf_token: string;
  last_seen_at: Date;
  account_created_at: Date | null;
} & { [K in Exclude<keyof AccountRow, 'id' | 'created_at'>]: AccountRow[K] | null };

const ACCOUNT_COLUMNS = ACCOUNT_LIMIT_COLUMNS.split(', ')
  .map((column) => `a.${column}`)
  .join(', ');
/** Advisory-lock class of sign-ins ('cs'), keyed by account, so that two at once cannot both keep MAX_SESSIONS. */
const LOCK_CLASS = 0x6373;

const randomToken = () => randomBytes(32).toString('base64url');

/**
 * Console sign-in sessions (sql/10_console_sessions.sql). The session id lives only in the
 * browser's cookie; the table keeps its SHA-256, the principal and the CSRF token.
 */
export class ConsoleSessions {
  constructor(private readonly pool: pg.Pool) {}

  /** adminTokenSha256: the hash of the admin token for an operator session (it ends when the token changes). */
  async create(principal: SessionPrincipal, adminTokenSha256: string | undefined): Promise<{ id: string; csrfToken: string }> {
    const id = randomToken();
    const csrfToken = randomToken();
    if (principal.kind === 'admin' && !adminTokenSha256) throw new Error('an operator session needs the admin token hash');
    const accountId = principal.kind === 'account' ? principal.account.id : null;
    await inTransaction(this.pool, async (client) => {
      await client.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [LOCK_CLASS, accountId ?? '']);
      await client.query(
        `INSERT INTO console_sessions (id_sha256, account_id, admin_token_sha256, csrf_token, expires_at)
         VALUES ($1, $2, $3, $4, now() + make_interval(secs => $5))`,
        [hashToken(id), accountId, principal.kind === 'admin' ? adminTokenSha256 : null, csrfToken, SESSION_IDLE_MS / 1000],
      );
      // Expired sessions go at every sign-in, and so do the principal's least recently used past MAX_SESSIONS.
      await client.query(
        `DELETE FROM console_sessions WHERE expires_at < now()
            OR id_sha256 IN (SELECT id_sha256 FROM console_sessions WHERE account_id IS NOT DISTINCT FROM $1
                              ORDER BY last_seen_at DESC, created_at DESC OFFSET $2)`,
        [accountId, MAX_SESSIONS],
      );
    });
    return { id, csrfToken };
  }

  /** The live session with this id, or undefined (unknown, expired, or its admin token replaced). */
  async find(id: string, adminTokenSha256: string | undefined): Promise<ConsoleSession | undefined> {
    const { rows } = await this.pool.query<SessionRow>(
      `SELECT s.account_id, s.admin_token_sha256, s.csrf_token, s.last_seen_at,
              a.name, a.events_username, a.created_at AS account_created_at, ${ACCOUNT_COLUMNS}
         FROM console_sessions s LEFT JOIN accounts a ON a.id = s.account_id
        WHERE s.id_sha256 = $1 AND s.expires_at > now()
          AND s.created_at > now() - make_interval(secs => $2)`,
      [hashToken(id), SESSION_MAX_MS / 1000],
    );
    const row = rows[0];
    if (!row) return undefined;
    let principal: SessionPrincipal;
    if (row.account_id !== null) {
      if (row.name === null) return undefined;
      principal = {
        kind: 'account',
        account: accountOfRow({ ...(row as Omit<AccountRow, 'id' | 'created_at'>), id: row.account_id, created_at: row.account_created_at! }),
      };
    } else {
      if (!adminTokenSha256 || row.admin_token_sha256 !== adminTokenSha256) return undefined;
      principal = { kind: 'admin' };
    }
    if (Date.now() - row.last_seen_at.getTime() > TOUCH_EVERY_MS) {
      await this.pool.query('UPDATE console_sessions SET last_seen_at = now(), expires_at = now() + make_interval(secs => $2) WHERE id_sha256 = $1', [
        hashToken(id),
        SESSION_IDLE_MS / 1000,
      ]);
    }
    return { principal, csrfToken: row.csrf_token };
  }

  async delete(id: string): Promise<void> {
    await this.pool.query('DELETE FROM console_sessions WHERE id_sha256 = $1', [hashToken(id)]);
  }
}
