import { Kafka, logLevel } from 'kafkajs';
import type { DeliveredEvent } from './events.ts';

/**
 * Every message of a sync's topics on the broker, from the beginning, as a kafkajs consumer
 * reads them (per partition in order), once it has caught up with every high watermark.
 */
export async function readKafkaEvents(brokers: string[], prefix: string, timeoutMs = 60_000): Promise<DeliveredEvent[]> {
  const kafka = new Kafka({ clientId: 'tributary-sim', brokers, logLevel: logLevel.NOTHING });
  const admin = kafka.admin();
  await admin.connect();
  let topics: string[];
  const marks = new Map<string, number>();
  try {
    topics = (await admin.listTopics()).filter((t) => t.startsWith(prefix));
    for (const topic of topics) {
      for (const p of await admin.fetchTopicOffsets(topic)) marks.set(`${topic}/${p.partition}`, Number(p.high));
    }
  } finally {
    await admin.disconnect();
  }
  const out: DeliveredEvent[] = [];
  if (topics.length === 0) return out;
  const consumer = kafka.consumer({ groupId: `sim-${Date.now()}-${Math.random().toString(36).slice(2)}` });
  await consumer.connect();
  try {
    await consumer.subscribe({ topics, fromBeginning: true });
    const next = new Map<string, number>();
    const caughtUp = () => [...marks].every(([tp, high]) => high === 0 || (next.get(tp) ?? 0) >= high);
    let done: () => void = () => undefined;
    const finished = new Promise<void>((resolve) => (done = resolve));
    await consumer.run({
      eachMessage: async ({ topic, partition, message }) => {
        const id = message.headers?.['svc-event-id'];
        out.push({ key: String(id ?? ''), value: message.value?.toString('utf8') ?? '', where: `kafka ${topic}/${partition}@${message.offset}` });
        next.set(`${topic}/${partition}`, Number(message.offset) + 1);
        if (caughtUp()) done();
      },
    });
    if (!caughtUp()) {
      const timer = new Promise<void>((_, reject) => setTimeout(() => reject(new Error(`Kafka: not caught up after ${timeoutMs} ms`)), timeoutMs));
      await Promise.race([finished, timer]);
    }
  } finally {
    await consumer.disconnect();
  }
  return out;
}
