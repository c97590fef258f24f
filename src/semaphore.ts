/** Work for a semaphore: runs once a slot is free; `priority` orders the waiting (lower first). */
export type Limited = <T>(work: () => Promise<T>, priority?: number) => Promise<T>;

/**
 * A counting semaphore: at most `n` of the works given to it run at once, the others wait
 * their turn, by priority and then in arrival order. A slot is handed straight to the next
 * waiting work, so a caller arriving meanwhile cannot take it.
 */
export function semaphore(n: number): Limited {
  let active = 0;
  const queue: Array<{ priority: number; resolve: () => void }> = [];
  return async <T>(work: () => Promise<T>, priority = 0): Promise<T> => {
    if (active < n) active++;
    else {
      await new Promise<void>((resolve) => {
        const at = queue.findIndex((w) => w.priority > priority);
        queue.splice(at < 0 ? queue.length : at, 0, { priority, resolve });
      });
    }
    try {
      return await work();
    } finally {
      const next = queue.shift();
      if (next) next.resolve();
      else active--;
    }
  };
}
