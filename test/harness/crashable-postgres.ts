import { type EmbeddedPostgres, startEmbeddedPostgres } from '../../src/db/embedded.ts';
import { createLogger } from '../../src/log.ts';
import { freePort } from './ports.ts';

/**
 * A PostgreSQL server of its own that a test or the simulation can crash: `crash()` is an immediate shutdown (no
 * checkpoint; recovery at the next start), `start()` brings it back on the same port.
 */
export class CrashablePostgres {
  private server: EmbeddedPostgres | undefined;

  private constructor(
    readonly name: string,
    private readonly dir: string,
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
}
