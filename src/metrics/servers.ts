import type pg from 'pg';
import type { Family } from './exposition.ts';

/**
 * The pool's servers, read from the control database at scrape time: the free space of each
 * one's disk where the service can read it (the embedded server, docs/operations.md#wal-retention),
 * and the bound on the WAL its replication slots keep (-1: none). Label: `server_id`.
 */
export async function serverFamilies(pool: pg.Pool): Promise<Family[]> {
  const { rows } = await pool.query<{ id: string; free: string | null; keep: string | null }>(
    `SELECT id, CASE WHEN disk_read_at > now() - interval '5 minutes' THEN free_disk_bytes END AS free, slot_wal_keep_mb AS keep
       FROM servers ORDER BY created_at, id`,
  );
  return [
    {
      name: 'tributary_server_free_disk_bytes',
      type: 'gauge',
      help: "Free space of the disk a pool server's data lives on, where the service can read it (the embedded server it started).",
      samples: rows
        .filter((r) => r.free !== null)
        .map((r) => ({ name: 'tributary_server_free_disk_bytes', labels: { server_id: r.id }, value: Number(r.free) })),
    },
    {
      name: 'tributary_server_slot_wal_keep_bytes',
      type: 'gauge',
      help: "A pool server's max_slot_wal_keep_size, in bytes, as last read: the most WAL its replication slots may keep; -1 is no bound.",
      samples: rows
        .filter((r) => r.keep !== null)
        .map((r) => ({
          name: 'tributary_server_slot_wal_keep_bytes',
          labels: { server_id: r.id },
          value: Number(r.keep) < 0 ? -1 : Number(r.keep) * 1024 * 1024,
        })),
    },
  ];
}
