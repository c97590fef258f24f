/**
 * Collects items (rows, or rows with their ids) into batches and keeps one batch in flight while the next one fills, so
 * converting rows in Node and loading them in PostgreSQL (its own process, the other
 * core) overlap instead of taking turns.
 */
export class BatchWriter<T> {
  private rows: T[] = [];
  private inflight: Promise<void> = Promise.resolve();
  private written = 0;

  constructor(
    private readonly write: (batch: T[]) => Promise<number>,
    private readonly batchRows = 1000,
  ) {}

  async add(rows: T[]): Promise<void> {
    for (const row of rows) this.rows.push(row);
    if (this.rows.length >= this.batchRows) await this.flush();
  }

  /** Starts writing what has been collected, after the previous batch has landed. */
  async flush(): Promise<void> {
    await this.inflight;
    if (this.rows.length === 0) return;
    const batch = this.rows;
    this.rows = [];
    this.inflight = this.write(batch).then((n) => {
      this.written += n;
    });
    // Marked handled here; the failure itself surfaces at the next flush() or close().
    this.inflight.catch(() => undefined);
  }

  /** Writes the rest and waits for everything; returns the rows written. */
  async close(): Promise<number> {
    await this.flush();
    await this.inflight;
    return this.written;
  }
}
