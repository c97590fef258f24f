/** Work for a semaphore: runs once a slot is free; `priority` orders the waiting (lower first). */
export type Limited = <T>(work: () => Promise<T>, priority?: number) => Promise<T>;

export interface SemaphoreOptions {
  /** Slots the works of one priority may hold at once (default: all); read at each decision. */
  capOf?: (priority: number) => number;
}

/**
 * A counting semaphore: at most `n` of the works given to it run at once, the others wait
 * their turn, by priority and then in arrival order, within their priority's cap. A slot is
 * handed straight to the next waiting work, so a caller arriving meanwhile cannot take it.
 * `poke()` looks at the waiting works again after a cap was raised.
 */
export function semaphore(n: number, options: SemaphoreOptions = {}): Limited & { poke(): void } {
  let active = 0;
  const held = new Map<number, number>();
  const queue: Array<{ priority: number; resolve: () => void }> = [];
  const fits = (priority: number) => active < n && (held.get(priority) ?? 0) < (options.capOf?.(priority) ?? n);
  const take = (priority: number) => {
    active++;
    held.set(priority, (held.get(priority) ?? 0) + 1);
  };
  const drain = () => {
    for (let i = 0; i < queue.length && active < n; ) {
      const waiting = queue[i]!;
      if (!fits(waiting.priority)) {
        i++;
        continue;
      }
      queue.splice(i, 1);
      take(waiting.priority);
      waiting.resolve();
    }
  };
  const limited = async <T>(work: () => Promise<T>, priority = 0): Promise<T> => {
    if (queue.length === 0 && fits(priority)) take(priority);
    else {
      await new Promise<void>((resolve) => {
        const at = queue.findIndex((w) => w.priority > priority);
        queue.splice(at < 0 ? queue.length : at, 0, { priority, resolve });
        drain();
      });
    }
    try {
      return await work();
    } finally {
      active--;
      held.set(priority, held.get(priority)! - 1);
      drain();
    }
  };
  return Object.assign(limited, { poke: drain });
}
