import type { Admin, Kafka } from 'kafkajs';
import { TributaryError } from '../../errors.ts';
import { within } from '../../time.ts';

/** An admin call (connect included) unanswered this long fails, and the client is dropped: a path that hangs without closing. */
const ADMIN_DEADLINE_MS = 60_000;

/**
 * A kafkajs admin client connected on first use. A failed call drops it, so the next call
 * starts on a fresh connection instead of a client stuck with a dead broker.
 */
export class LazyAdmin {
  private admin: Promise<Admin> | undefined;
  private closed = false;

  constructor(private readonly kafka: Kafka) {}

  async run<T>(work: (admin: Admin) => Promise<T>): Promise<T> {
    if (this.closed) throw new TributaryError('unavailable', 'the Kafka admin client is closed', { expose: false });
    if (!this.admin) {
      const admin = this.kafka.admin();
      const connecting = admin.connect().then(() => admin);
      this.admin = connecting;
      connecting.catch(() => {
        if (this.admin === connecting) this.admin = undefined;
        admin.disconnect().catch(() => undefined);
      });
    }
    const current = this.admin;
    try {
      return await within(
        current.then((admin) => work(admin)),
        ADMIN_DEADLINE_MS,
        'a Kafka admin request',
      );
    } catch (error) {
      if (this.admin === current) this.admin = undefined;
      current.then((a) => a.disconnect()).catch(() => undefined);
      throw error;
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    const current = this.admin;
    this.admin = undefined;
    await current?.then((a) => a.disconnect()).catch(() => undefined);
  }
}
