import type { IncompleteList } from '../control/status-fields.ts';
import type { Logger } from '../log.ts';
import { UpstreamUnreachable } from '../upstream/http.ts';
import { StripeError } from './client.ts';

/**
 * The lists a Stripe sync cannot read completely right now, and why, as the sync's status
 * shows them: a list whose reads wait out a rate limit or fail upstream stays here until its
 * next page is read; one the key may not read, until a read of it succeeds. Written to the
 * control database only when the set changes, one write at a time, the newest set last.
 */
export class IncompleteLists {
  private readonly entries = new Map<string, IncompleteList>();
  private writing: Promise<void> | undefined;
  private again = false;

  constructor(
    private readonly write: (lists: IncompleteList[]) => Promise<void>,
    private readonly logger: Logger,
  ) {}

  /** The list is held up, or cannot be read, for `reason`; since when it first was. */
  note(list: string, table: string, reason: string): void {
    const seen = this.entries.get(list);
    if (seen?.reason === reason) return;
    this.entries.set(list, { list, table, reason, since: seen?.since ?? new Date().toISOString() });
    this.changed();
  }

  /** A read of the list succeeded: whatever held it up is gone. */
  clear(list: string): void {
    if (this.entries.delete(list)) this.changed();
  }

  /** How many lists are incomplete now. */
  get size(): number {
    return this.entries.size;
  }

  /** Resolves once the latest set is written (tests and a stopping runner wait on it). */
  async settled(): Promise<void> {
    while (this.writing) await this.writing;
  }

  private changed(): void {
    if (this.writing) {
      this.again = true;
      return;
    }
    this.writing = (async () => {
      do {
        this.again = false;
        const lists = [...this.entries.values()].sort((a, b) => a.list.localeCompare(b.list));
        await this.write(lists).catch((err) => this.logger.warn({ err }, 'could not record the incomplete lists'));
      } while (this.again);
      this.writing = undefined;
    })();
  }
}

/** Why a read is being retried, in words: a 429 waited out, an upstream error with its status. */
export function retryReason(error: StripeError | UpstreamUnreachable): string {
  if (error instanceof StripeError && error.kind === 'rate_limited') return "waiting out Stripe's rate limit (429)";
  if (error instanceof UpstreamUnreachable) return `Stripe could not be reached (${error.message}); retrying`;
  return `${error.message}; retrying`;
}

/** Why a read failed for good this round; the backfill resumes from the list's last page. */
export function failureReason(error: unknown): string {
  if (error instanceof StripeError && error.kind === 'rate_limited')
    return "Stripe's rate limit (429) outlasted the retries; resuming from the list's last page";
  const message = error instanceof Error ? error.message : String(error);
  return `${message}; resuming from the list's last page`;
}

/**
 * A 404 `resource_missing` on a list under a parent: the parent is gone (deleted since it was
 * listed; its deletion event, or the next full backfill, removes its row). Not a list the key
 * cannot read: that parent's share of the list is simply empty.
 */
export function parentGone(error: unknown): boolean {
  return error instanceof StripeError && error.kind === 'missing' && error.code === 'resource_missing';
}

/** Errors that mean "this list cannot be read with this key or account", not "try again". */
export function unreadable(error: unknown): string | undefined {
  if (!(error instanceof StripeError)) return undefined;
  if (error.kind === 'permission' || error.kind === 'missing' || error.kind === 'invalid') return `${error.status}: ${error.message}`;
  return undefined;
}
