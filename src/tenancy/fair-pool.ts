import pg from 'pg';
import { KeyedLimit, type Release } from './keyed-limit.ts';
import type { TenantScope } from './scope.ts';

type Checkout = (err: Error | undefined, client: pg.PoolClient | undefined, done: (release?: unknown) => void) => void;

export interface FairPoolOptions {
  scope: TenantScope;
  /** Connections one tenant's requests may hold at once (the rest of the pool stays for the others). */
  perTenant: number;
}

/**
 * The control database's pool, shared fairly: the requests of one account (or of one credential,
 * before it is known whose) hold at most `perTenant` of its connections at once, and wait in
 * their own line for more. Without it a flood of one account's requests, or its long polls
 * queued on one consumer group's lock, took all ten, and every other tenant's request waited
 * behind them. An account's background work (webhook delivery, backfills, the Kafka relay:
 * TenantScope.runAs) shares the account's places with its requests. Sync runners, the decoder
 * and the operator's requests are not limited.
 *
 * Every checkout goes through connect(): pg-pool's query() calls it with a callback and
 * releases the client when the statement ends; a bare connect() is a transaction's client, held
 * across statements. While a request holds one, its further checkouts skip the line: waiting
 * for a place while holding one could wait forever.
 */
export class FairPool extends pg.Pool {
  private readonly fair: FairPoolOptions & { limit: KeyedLimit };

  constructor(config: pg.PoolConfig, fair: FairPoolOptions) {
    super(config);
    this.fair = { ...fair, limit: new KeyedLimit(fair.perTenant) };
  }

  override connect(): Promise<pg.PoolClient>;
  override connect(callback: Checkout): void;
  override connect(callback?: Checkout): Promise<pg.PoolClient> | undefined {
    const scope = this.fair.scope.current();
    const key = scope?.key;
    if (!scope || key === undefined || scope.holding > 0) {
      if (!callback) return super.connect();
      super.connect(callback);
      return undefined;
    }
    const held = !callback;
    const checkout = (done: Checkout) => {
      // acquire() never rejects: it waits for a place.
      void this.fair.limit.acquire(key).then((release) => {
        super.connect((err, client, free) => {
          if (err || !client) {
            release();
            return done(err ?? new Error('no client'), undefined, free);
          }
          if (held) scope.holding++;
          done(undefined, client, this.releasing(client, release, held ? () => scope.holding-- : undefined));
        });
      });
    };
    if (callback) {
      checkout(callback);
      return undefined;
    }
    return new Promise((resolve, reject) => checkout((err, client) => (err || !client ? reject(err) : resolve(client))));
  }

  /** The client's release() (pg-pool sets a new one per checkout) also gives the tenant's place back, once. */
  private releasing(client: pg.PoolClient, place: Release, after?: () => void): (err?: unknown) => void {
    const original = client.release.bind(client);
    let done = false;
    const release = (err?: unknown) => {
      if (!done) {
        done = true;
        place();
        after?.();
      }
      return original(err as Error | boolean | undefined);
    };
    client.release = release;
    return release;
  }
}
