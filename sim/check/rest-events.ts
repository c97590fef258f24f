import type { DeliveredEvent } from './events.ts';

export interface RestCredentials {
  restUrl: string;
  username: string;
  password: string;
}

async function call<T>(creds: RestCredentials, method: string, path: string, body?: unknown): Promise<T> {
  const response = await fetch(`${creds.restUrl}${path}`, {
    method,
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
 * Every event of a sync's topics from offset 0, as a consumer reads them with `/fetch`:
 * per partition in offset order (records keep one partition, so per-record order is the
 * log's). `prefix` is `svc.<sync id>.`.
 */
export async function readRestEvents(creds: RestCredentials, prefix: string): Promise<DeliveredEvent[]> {
  const topics = await call<Record<string, number>>(creds, 'GET', '/topics');
  const out: DeliveredEvent[] = [];
  for (const [topic, partitions] of Object.entries(topics).sort()) {
    if (!topic.startsWith(prefix)) continue;
    for (let partition = 0; partition < partitions; partition++) {
      let offset = 0;
      for (;;) {
        const page = await call<Array<{ offset: number; key: string; value: string }>>(creds, 'POST', '/fetch', { topic, partition, offset, timeout: 0 });
        if (page.length === 0) break;
        for (const m of page) out.push({ key: m.key, value: m.value, where: `rest ${topic}/${partition}@${m.offset}` });
        offset = page[page.length - 1]!.offset + 1;
      }
    }
  }
  return out;
}
