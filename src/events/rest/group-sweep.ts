import type pg from 'pg';
import { toError } from '../../errors.ts';
import type { Logger } from '../../log.ts';
import type { GroupKey, GroupStore } from './groups.ts';

export interface GroupSweepOptions {
  pool: pg.Pool;
  groups: GroupStore;
  logger: Logger;
  /** How often to sweep. */
  everyMs: number;
  /** A group with no instance goes after this long without a consume or commit. */
  retentionMs: number;
  /** Groups handled per sweep and kind; the rest wait for the next sweep. */
  batch?: number;
}

export interface SweepCounts {
  instances: number;
  groups: number;
  offsets: number;
}

/**
 * Removes what consumer groups no longer need, so that an account's groups are bounded in
 * time as well as in number: instances past their session timeout (a consume of another
 * instance removes them too, but a group nobody consumes from would keep them), groups with
 * no instance left once idle for the retention (their committed offsets with them), and
 * committed offsets of topics that are gone (their sync was deleted). Each group is handled
 * under its own lock, as a consume's rebalance is.
 */
export async function sweepGroups(options: Omit<GroupSweepOptions, 'everyMs' | 'logger'>): Promise<SweepCounts> {
  const { pool, groups, retentionMs } = options;
  const batch = options.batch ?? 1000;
  const keyOf = (row: { account_id: string; group_id: string }): GroupKey => ({ accountId: row.account_id, groupId: row.group_id });
  const counts: SweepCounts = { instances: 0, groups: 0, offsets: 0 };

  const { rows: stale } = await pool.query<{ account_id: string; group_id: string }>(
    `SELECT DISTINCT account_id, group_id FROM consumer_group_members
      WHERE last_seen < clock_timestamp() - session_timeout_ms * interval '1 millisecond' LIMIT $1`,
    [batch],
  );
  for (const row of stale) {
    const key = keyOf(row);
    counts.instances += (await groups.locked(key, (client) => groups.expire(client, key))).length;
  }

  const idleSql = `active_at < now() - make_interval(secs => $1)
    AND NOT EXISTS (SELECT 1 FROM consumer_group_members m WHERE m.account_id = g.account_id AND m.group_id = g.group_id)`;
  const { rows: idle } = await pool.query<{ account_id: string; group_id: string }>(
    `SELECT account_id, group_id FROM consumer_groups g WHERE ${idleSql} LIMIT $2`,
    [retentionMs / 1000, batch],
  );
  for (const row of idle) {
    const key = keyOf(row);
    // Checked again under the lock: an instance may have joined since.
    const { rowCount } = await groups.locked(key, (client) =>
      client.query(`DELETE FROM consumer_groups g WHERE account_id = $2 AND group_id = $3 AND ${idleSql}`, [retentionMs / 1000, key.accountId, key.groupId]),
    );
    counts.groups += rowCount ?? 0;
  }

  const { rowCount } = await pool.query(
    `DELETE FROM consumer_group_offsets o
      WHERE NOT EXISTS (SELECT 1 FROM event_topics t WHERE t.topic = o.topic AND t.account_id = o.account_id)`,
  );
  counts.offsets = rowCount ?? 0;
  return counts;
}

/** Sweeps every `everyMs` until stopped; a failed sweep is logged and tried again at the next. */
export function startGroupSweeper(options: GroupSweepOptions): { stop(): Promise<void> } {
  let running: Promise<void> | undefined;
  let stopped = false;
  const sweep = async () => {
    try {
      const counts = await sweepGroups(options);
      if (counts.instances + counts.groups + counts.offsets > 0) options.logger.debug(counts, 'swept consumer groups');
    } catch (error) {
      if (!stopped) options.logger.warn({ err: toError(error) }, 'could not sweep consumer groups; trying again later');
    } finally {
      running = undefined;
    }
  };
  // A sweep still under way when the next is due: that one is skipped.
  const timer = setInterval(() => {
    if (!stopped && !running) running = sweep();
  }, options.everyMs);
  timer.unref();
  return {
    async stop() {
      stopped = true;
      clearInterval(timer);
      await running;
    },
  };
}
