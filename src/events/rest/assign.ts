import type { TopicPartition } from './input.ts';

export interface Subscriber {
  instanceId: string;
  topics: string[];
}

/**
 * Kafka's round-robin assignor: every partition of every subscribed topic, in (topic,
 * partition) order, goes to the next instance (in id order) that subscribes to its topic.
 * A pure function of the live instances and the topics, so every process that looks at
 * the same group computes the same split.
 */
export function assignRoundRobin(members: Subscriber[], partitions: Map<string, number>): Map<string, TopicPartition[]> {
  const sorted = [...members].sort((a, b) => (a.instanceId < b.instanceId ? -1 : a.instanceId > b.instanceId ? 1 : 0));
  const subscribed = sorted.map((m) => new Set(m.topics));
  const assignment = new Map<string, TopicPartition[]>(sorted.map((m) => [m.instanceId, []]));
  const topics = [...partitions.keys()].filter((t) => subscribed.some((s) => s.has(t))).sort();
  let next = 0;
  for (const topic of topics) {
    for (let partition = 0; partition < partitions.get(topic)!; partition++) {
      for (let tried = 0; tried < sorted.length; tried++) {
        const index = (next + tried) % sorted.length;
        if (!subscribed[index]!.has(topic)) continue;
        assignment.get(sorted[index]!.instanceId)!.push({ topic, partition });
        next = index + 1;
        break;
      }
    }
  }
  return assignment;
}
