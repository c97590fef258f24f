import type { RequestScope, RestContext } from './context.ts';
import type { FetchRequest } from './input.ts';
import { ResponseBudget, toMessage, type RestMessage } from './messages.ts';
import { longPoll, marksOf } from './poll.ts';

/**
 * `/fetch`: messages from the given offsets on, no consumer group. Every partition asked for
 * must be the account's own (else the same 404 as an unknown one); per partition the answer
 * is in offset order. When nothing is there yet it waits up to `timeout` for the decoder.
 */
export async function fetchMessages(ctx: RestContext, scope: RequestScope, request: FetchRequest): Promise<RestMessage[]> {
  const topics = await ctx.topics.require(scope.accountId, request.targets);
  const syncIds = [...topics.values()].map((t) => t.syncId);
  return longPoll({ bus: ctx.bus, timeoutMs: request.timeoutMs, signal: scope.signal, sliceMs: ctx.limits.pollSliceMs }, async () => {
    const marks = marksOf(ctx.bus, syncIds);
    const budget = new ResponseBudget(ctx.limits);
    const items: RestMessage[] = [];
    for (const target of request.targets) {
      if (budget.remaining === 0) break;
      const events = await ctx.reader.byOffset(target.topic, target.partition, String(target.offset), budget.remaining);
      items.push(...budget.take(events).map(toMessage));
    }
    return { items, marks };
  });
}
