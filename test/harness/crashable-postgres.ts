import { rm } from 'node:fs/promises';
import { type EmbeddedPostgres, startEmbeddedPostgres } from '../../src/db/embedded.ts';
import { createLogger } from '../../src/log.ts';
import { pause } from '../../src/time.ts';
import { freePort } from './ports.ts';
import { query } from './postgres.ts';
import { startStandby } from './standby.ts';

/**
 * A PostgreSQL server of its own that a test or the simulation can crash: `crash()` is an immediate shutdown (no
 * checkpoint; recovery at the next start), `start()` brings it back on the same port.
 */
export class CrashablePostgres {
  private server: EmbeddedPostgres | undefined;

  private constructor(
    readonly name: string,
    private dir: string,
    readonly port: number,
    private readonly maxConnections?: number,
  ) {}

  static async start(name: string, dir: string, maxConnections?: number): Promise<CrashablePostgres> {
    const pg = new CrashablePostgres(name, dir, await freePort(), maxConnections);
    await pg.start();
    return pg;
  }

  get adminUrl(): string {
    if (!this.server) throw new Error(`${this.name} is not running`);
    return this.server.adminUrl;
  }

  /** The admin URL of another database on this server. */
  databaseUrl(database: string): string {
    const url = new URL(this.adminUrl);
    url.pathname = `/${database}`;
    return url.toString();
  }

  async start(): Promise<void> {
    this.server = await startEmbeddedPostgres({ dir: this.dir, port: this.port, logger: createLogger({ level: 'warn' }), maxConnections: this.maxConnections });
  }

  async crash(): Promise<void> {
    await this.server?.stop('immediate');
  }

  async stop(): Promise<void> {
    await this.server?.stop('fast');
  }

  /**
   * A failover as a hosted PostgreSQL makes one: a standby of this server (standby.ts) syncs
   * its failover slots (waited for up to `syncWaitMs`), then this server crashes, the standby
   * is promoted and takes this server's port (the address that follows the primary), and the
   * old folder goes. Answers the slots the standby had not synced: lost with the old primary.
   */
  async failover(syncWaitMs: number, signal?: AbortSignal): Promise<string[]> {
    const standby = await startStandby({ adminUrl: this.adminUrl, port: this.port, dir: this.dir });
    const names = async (url: string, where: string) =>
      new Set(
        (await query<{ slot_name: string }>(url, `SELECT slot_name FROM pg_replication_slots WHERE slot_type = 'logical' AND ${where}`)).map(
          (r) => r.slot_name,
        ),
      );
    let unsynced: string[] = [];
    for (const deadline = Date.now() + syncWaitMs; ; ) {
      const synced = await names(standby.adminUrl, 'synced AND NOT temporary');
      unsynced = [...(await names(this.adminUrl, 'failover'))].filter((slot) => !synced.has(slot));
      if (unsynced.length === 0 || Date.now() > deadline || signal?.aborted) break;
      await pause(500, signal).catch(() => undefined);
    }
    await this.crash();
    await standby.promote();
    await standby.stop(true);
    const old = this.dir;
    this.dir = standby.dir;
    await this.start();
    await rm(old, { recursive: true, force: true });
    return unsynced;
  }
}
