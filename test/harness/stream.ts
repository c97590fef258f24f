import { readTables, type TableRows } from '../../sim/check/canonical.ts';
import type { DeliveredEvent } from '../../sim/check/events.ts';
import type { RestTail } from '../../sim/check/rest-events.ts';
import { waitFor } from './process.ts';

/**
 * A sync's tables, and in `stream` every event up to them: the tables are read, the log caught
 * up (`caughtUp`, the wait endpoint) and read on; when that brings no new event, nothing
 * committed between the last two reads of the log, and the tables are what the events leave.
 */
export async function tablesAtOnePoint(options: {
  reader: string;
  caughtUp: () => Promise<void>;
  tail: RestTail;
  stream: DeliveredEvent[];
  timeoutMs?: number;
}): Promise<Map<string, TableRows>> {
  return waitFor(
    'the tables and the stream at one point',
    async () => {
      const read = await readTables(options.reader);
      await options.caughtUp();
      const more = await options.tail.next();
      options.stream.push(...more);
      return more.length === 0 ? read : undefined;
    },
    options.timeoutMs ?? 90_000,
  );
}
