import { performance } from 'node:perf_hooks';
import v8 from 'node:v8';
import type { Logger } from './log.ts';

export interface HeapTrimOptions {
  logger: Logger;
  /** How often the heap and the event loop are looked at. */
  everyMs?: number;
  /** The event loop's busy share over the last look below which the process counts as quiet. */
  quietBelow?: number;
  /** A trim only once the heap holds this many times what it held after the last one, and... */
  growth?: number;
  /** ...at least this many bytes more. */
  minGrowthBytes?: number;
}

/**
 * Gives the memory of a burst back once it is over. V8's own memory reducer shrinks the heap
 * only once allocation falls below about 1 MB a second, which a running service (polls, lag
 * reports, keep-alives) never does: after ten webhooks' backlog drained, 34 MB were live in a
 * heap of 149 MB committed and the process stayed at 330–350 MB resident against 140–150 MB
 * idle. So once the event loop has been quiet for a look and the heap has grown well past its
 * size after the last trim, the process asks V8 for a collection that compacts and returns
 * free pages (a pause of 60–230 ms, once per burst). Without --expose-gc (the service's Node
 * flags, node-flags.ts) it does nothing.
 */
export function startHeapTrim(options: HeapTrimOptions): () => void {
  const collect = (globalThis as { gc?: (options: object) => void }).gc;
  if (!collect) return () => undefined;
  const { logger, everyMs = 10_000, quietBelow = 0.3, growth = 2, minGrowthBytes = 64 * 2 ** 20 } = options;
  let baseline = v8.getHeapStatistics().total_heap_size;
  let loop = performance.eventLoopUtilization();
  const timer = setInterval(() => {
    const busy = performance.eventLoopUtilization(loop);
    loop = performance.eventLoopUtilization();
    const committed = v8.getHeapStatistics().total_heap_size;
    if (busy.utilization >= quietBelow || committed < Math.max(baseline * growth, baseline + minGrowthBytes)) return;
    const started = performance.now();
    collect({ type: 'major', execution: 'sync', flavor: 'last-resort' });
    baseline = v8.getHeapStatistics().total_heap_size;
    const mb = (bytes: number) => Math.round(bytes / 2 ** 20);
    logger.info({ fromMb: mb(committed), toMb: mb(baseline), pauseMs: Math.round(performance.now() - started) }, 'heap trimmed after a burst');
  }, everyMs);
  timer.unref();
  return () => clearInterval(timer);
}
