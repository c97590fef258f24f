import { Worker } from 'node:worker_threads';
import { ARRIVAL_HEADER } from '../../fakes/shared/arrival.ts';

export interface ArrivalFront {
  url: string;
  close(): Promise<void>;
}

/**
 * An HTTP front for a fake, in a worker thread: it stamps each request's arrival (the
 * `x-fake-arrived-at` header) on a loop nothing else runs on, then passes the request and its
 * answer through unchanged, a dropped or cut answer included.
 */
export async function startArrivalFront(targetUrl: string): Promise<ArrivalFront> {
  const worker = new Worker(new URL('./arrival-front-worker.mjs', import.meta.url), {
    workerData: { targetUrl, header: ARRIVAL_HEADER },
    // Plain JavaScript: none of the parent's loader or input-type flags apply to it.
    execArgv: [],
  });
  const port = await new Promise<number>((resolve, reject) => {
    worker.once('message', (message: { port: number }) => resolve(message.port));
    worker.once('error', reject);
  });
  return {
    url: `http://127.0.0.1:${port}`,
    close: async () => void (await worker.terminate()),
  };
}
