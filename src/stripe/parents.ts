import { semaphore } from '../semaphore.ts';

export interface InOrderOptions {
  /** Reads one parent's share of the list. */
  read(id: string): Promise<void>;
  /** Saves the place: every id up to and including this one is read. Calls come one at a time, in order. */
  save(through: string): Promise<void>;
  /** Parents read at once. */
  atOnce: number;
  /** How far past the last parent of the read prefix a read may start: what a restart may read twice. */
  window: number;
  /** The place is saved at most this often while reading, and once at the end. */
  saveEveryMs: number;
  signal: AbortSignal;
}

/**
 * Reads the parents' lists several at once, in id order within a window, and saves the place
 * as the prefix read in full grows. After a failure no new read starts; the place saved is
 * the prefix before the failing parent, so the next run reads again at most a window's worth.
 */
export async function readParentsInOrder(ids: string[], options: InOrderOptions): Promise<void> {
  const read = ids.map(() => false);
  let prefix = 0;
  let failing = false;
  let savedAt = Date.now();
  let saved = 0;
  let saving: Promise<unknown> = Promise.resolve();
  let waiting: Array<() => void> = [];
  const wakeWaiting = () => {
    const woken = waiting;
    waiting = [];
    for (const resolve of woken) resolve();
  };
  const savePlace = () => {
    saving = saving.then(async () => {
      if (prefix <= saved) return;
      const through = prefix;
      await options.save(ids[through - 1]!);
      saved = through;
    });
    return saving;
  };
  const slots = semaphore(options.atOnce);
  const results = await Promise.allSettled(
    ids.map(async (id, i) => {
      while (!failing && i >= prefix + options.window) await new Promise<void>((resolve) => waiting.push(resolve));
      await slots(async () => {
        if (failing) return;
        try {
          options.signal.throwIfAborted();
          await options.read(id);
        } catch (error) {
          // A stop too: the reads waiting past the window must not wait for a prefix that no longer grows.
          failing = true;
          wakeWaiting();
          throw error;
        }
        read[i] = true;
        while (prefix < ids.length && read[prefix]) prefix++;
        wakeWaiting();
        if (Date.now() - savedAt >= options.saveEveryMs) {
          savedAt = Date.now();
          await savePlace();
        }
      });
    }),
  );
  await savePlace();
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) throw failed.reason;
}
