import type { SyncAttachmentLinks } from '../attachments/links.ts';
import type pg from 'pg';
import type { SyncSchemas } from '../syncdb/schemas.ts';
import { deleteRows } from '../writer/upsert.ts';
import type { AirtableClient } from './client.ts';
import { fetchIntoTable } from './fetch-by-id.ts';
import type { RefetchQueue } from './refetch-queue.ts';
import type { TableMapping } from './schema.ts';
import type { AirtableSyncState } from './sync-state.ts';
import { shapeOf } from './tables.ts';

export interface RecordTurnsOptions {
  state: AirtableSyncState;
  target: pg.Pool;
  schemas: SyncSchemas;
  links?: SyncAttachmentLinks;
  /** The runner's refetch queue, which itself fetches through these turns. */
  queue: () => RefetchQueue;
}

/**
 * A sync's writes of single records outside its sweeps, one at a time: the fetches by id of
 * change capture and of the refetch queue, and capture's deletes. Of two fetches of a record
 * the later one is also written later, and a delete never comes before a fetch asked for
 * earlier, whose answer would write the record back.
 */
export class RecordTurns {
  /** The latest turn: the next one waits for it. */
  private last: Promise<unknown> = Promise.resolve();

  constructor(private readonly options: RecordTurnsOptions) {}

  /** Fetches the records' current versions and writes them; those no longer there are deleted. */
  refetch(client: AirtableClient, tableId: string, ids: string[]): Promise<void> {
    return this.inTurn(tableId, ids, (mapping) => this.refetchInto(client, mapping, this.options.schemas.live, ids));
  }

  /**
   * Rows change capture read were deleted upstream, deleted in turn with the fetches by id: a
   * fetch still on its way (debounced or held, from the refetch queue) made before the delete
   * would otherwise write the record back after it. Found by the traffic simulation: records
   * deleted upstream stayed in the database, and a sweep keeps rows created in its last minute.
   */
  deleteInTurn(tableId: string, ids: string[]): Promise<void> {
    return this.inTurn(tableId, ids, (mapping) => deleteRows(this.options.target, shapeOf(mapping, this.options.schemas.live), ids));
  }

  /**
   * Fetches records by id into the table in `schema` (live or swap); returns when the fetch began. Into a
   * live table, records a proxied write may have overtaken are fetched again later (writer/fetched.ts);
   * a rebuild's table is checked at its swap instead.
   */
  async refetchInto(client: AirtableClient, mapping: TableMapping, schema: string, ids: string[]): Promise<number> {
    const { target, schemas, state, links } = this.options;
    const queue = this.options.queue();
    const fetched = await fetchIntoTable({ client, target, schemas, links }, mapping, schema, ids);
    if (fetched.tableGone) {
      state.needCycle();
      return fetched.fetchedAt;
    }
    queue.hold(mapping.tableId, fetched.held);
    const heldSet = new Set(fetched.held);
    for (const id of ids) {
      if (heldSet.has(id)) continue;
      state.touched(mapping.tableId, [id], fetched.fetchedAt);
      queue.written(mapping.tableId, id);
    }
    return fetched.fetchedAt;
  }

  /** Runs `work` on a live table's rows after every turn asked for before it. */
  private inTurn(tableId: string, ids: string[], work: (mapping: TableMapping) => Promise<unknown>): Promise<void> {
    const run = this.last
      .catch(() => undefined)
      .then(async () => {
        const mapping = this.options.state.live.get(tableId);
        if (!mapping || ids.length === 0) return;
        await work(mapping);
      });
    this.last = run;
    return run;
  }
}
