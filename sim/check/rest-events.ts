import type { DeliveredEvent } from './events.ts';

export interface RestCredentials {
  restUrl: string;
  username: string;
  password: string;
}

async function call<T>(creds: RestCredentials, method: string, path: string, body?: unknown, signal?: AbortSignal): Promise<T> {
  const response = await fetch(`${creds.restUrl}${path}`, {
    method,
    signal,
    headers: {
      authorization: `Basic ${Buffer.from(`${creds.username}:${creds.password}`).toString('base64')}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`events REST ${method} ${path}: ${response.status} ${text.slice(0, 200)}`);
  return JSON.parse(text) as T;
}

/**
 * A consumer of a sync's topics with `/fetch`, from offset 0: each `next()` gives the events
 * logged since the last, per partition in offset order (records keep one partition, so
 * per-record order is the log's). `prefix` is `svc.<sync id>.`. A `next()` that fails (the
 * service down for a fault) moves no offset: the next one reads the same events again. It
 * once kept the offsets of the pages read before the failure and dropped their events, and
 * the simulation reported events on Kafka and webhooks missing from the log.
 */
export class RestTail {
  private offsets = new Map<string, number>();

  constructor(
    private readonly creds: RestCredentials,
    private readonly prefix: string,
  ) {}

  /** `signal`: a read given up moves no offset, like one that failed. */
  async next(signal?: AbortSignal): Promise<DeliveredEvent[]> {
    const topics = await call<Record<string, number>>(this.creds, 'GET', '/topics', undefined, signal);
    const out: DeliveredEvent[] = [];
    const offsets = new Map(this.offsets);
    for (const [topic, partitions] of Object.entries(topics).sort()) {
      if (!topic.startsWith(this.prefix)) continue;
      for (let partition = 0; partition < partitions; partition++) {
        const at = `${topic}/${partition}`;
        for (;;) {
          const offset = offsets.get(at) ?? 0;
          const page = await call<Array<{ offset: number; key: string; value: string }>>(
            this.creds,
            'POST',
            '/fetch',
            {
              topic,
              partition,
              offset,
              timeout: 0,
            },
            signal,
          );
          if (page.length === 0) break;
          for (const m of page) out.push({ key: m.key, value: m.value, where: `rest ${topic}/${partition}@${m.offset}` });
          offsets.set(at, page[page.length - 1]!.offset + 1);
        }
      }
    }
    this.offsets = offsets;
    return out;
  }
}

/** Every event of a sync's topics from offset 0. */
export function readRestEvents(creds: RestCredentials, prefix: string): Promise<DeliveredEvent[]> {
  return new RestTail(creds, prefix).next();
}
