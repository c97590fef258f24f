import kafkajs, { type Producer, type TopicMessages } from 'kafkajs';
import { TributaryError, toError } from '../../errors.ts';
import type { Logger } from '../../log.ts';
import { DeadlinePassed, within } from '../../time.ts';
import { LazyAdmin } from './admin.ts';
import { isLegalTopicName, newKafkaClient, type KafkaConnectionOptions } from './config.ts';

const { Partitioners } = kafkajs;

export interface KafkaPublisherOptions extends KafkaConnectionOptions {
  logger: Logger;
  /** How long one produce request may take before kafkajs gives up on it (ms). */
  requestTimeoutMs?: number;
  /** Consecutive failed sends after which the producer is replaced by a fresh one. */
  resetAfterFailures?: number;
}

/** One message as the relay hands it over: the partition is always explicit. */
export interface OutgoingMessage {
  partition: number;
  key: string;
  value: string;
  headers: Record<string, string>;
}

export interface OutgoingBatch {
  topic: string;
  messages: OutgoingMessage[];
}

/**
 * The process's one connection to Kafka for publishing, shared by every sync's relay:
 * an idempotent producer (acks=all, one request in flight per broker, so a retried
 * request can neither duplicate nor overtake another) and an admin client that creates
 * topics on demand. Both connect lazily and reconnect after failures.
 */
export interface KafkaPublisher {
  /** Makes sure `topic` exists with at least `partitions` partitions. Idempotent; cached per process. */
  ensureTopic(topic: string, partitions: number): Promise<void>;
  /** Sends and resolves once the broker has acknowledged every message (all in-sync replicas). */
  send(batches: OutgoingBatch[]): Promise<void>;
  close(): Promise<void>;
}

/**
 * Producer errors after which this producer's id and sequence numbers are of no further use:
 * a new producer (new id, sequences from 0) is the way out. What it resends may then be
 * written twice; at-least-once allows that, and order is kept because the relay resends
 * from its cursor, in order.
 */
const PRODUCER_STATE_ERRORS = new Set([
  'OUT_OF_ORDER_SEQUENCE_NUMBER',
  'UNKNOWN_PRODUCER_ID',
  'INVALID_PRODUCER_EPOCH',
  'INVALID_PRODUCER_ID_MAPPING',
  'PRODUCER_FENCED',
]);

/** The Kafka protocol error types anywhere in a kafkajs error's chain of causes. */
export function kafkaErrorTypes(thrown: unknown): string[] {
  const types: string[] = [];
  const seen = new Set<unknown>();
  const visit = (e: unknown) => {
    if (!e || typeof e !== 'object' || seen.has(e)) return;
    seen.add(e);
    const { type, cause, errors } = e as { type?: unknown; cause?: unknown; errors?: unknown };
    if (typeof type === 'string') types.push(type);
    visit(cause);
    if (Array.isArray(errors)) errors.forEach(visit);
  };
  visit(thrown);
  return types;
}

export function createKafkaPublisher(options: KafkaPublisherOptions): KafkaPublisher {
  return new SharedPublisher(options);
}

class SharedPublisher implements KafkaPublisher {
  private readonly logger: Logger;
  private producer: Promise<Producer> | undefined;
  private readonly admin: LazyAdmin;
  /** Bumped whenever the producer is replaced, so concurrent failures replace it only once. */
  private generation = 0;
  private failures = 0;
  private closed = false;
  private readonly topics = new Map<string, number>();
  private readonly kafka;

  constructor(private readonly options: KafkaPublisherOptions) {
    this.logger = options.logger.child({ part: 'kafka-publisher' });
    this.kafka = newKafkaClient(options, this.logger, {
      requestTimeout: options.requestTimeoutMs ?? 30_000,
      // Our own loops retry forever; kafkajs only bridges short hiccups before reporting.
      retry: { initialRetryTime: 100, maxRetryTime: 2_000, retries: 5 },
    });
    this.admin = new LazyAdmin(this.kafka);
  }

  async ensureTopic(topic: string, partitions: number): Promise<void> {
    if ((this.topics.get(topic) ?? 0) >= partitions) return;
    if (!isLegalTopicName(topic)) {
      throw new TributaryError('internal', `"${topic}" is not a legal Kafka topic name`, { expose: false });
    }
    await this.admin.run(async (admin) => {
      const created = await admin.createTopics({ topics: [{ topic, numPartitions: partitions }], waitForLeaders: true });
      if (!created) {
        // Made earlier (by us before a restart, or by an operator): it needs enough partitions
        // for every log partition to map onto the Kafka partition with the same number.
        const metadata = await admin.fetchTopicMetadata({ topics: [topic] });
        const existing = metadata.topics[0]?.partitions.length ?? 0;
        if (existing < partitions) {
          this.logger.info({ topic, existing, partitions }, 'adding partitions to a Kafka topic');
          await admin.createPartitions({ topicPartitions: [{ topic, count: partitions }] });
        }
      } else {
        this.logger.info({ topic, partitions }, 'Kafka topic created');
      }
    });
    this.topics.set(topic, partitions);
  }

  async send(batches: OutgoingBatch[]): Promise<void> {
    if (this.closed) throw new TributaryError('unavailable', 'the Kafka publisher is closed', { expose: false });
    const generation = this.generation;
    const topicMessages: TopicMessages[] = batches.map((b) => ({ topic: b.topic, messages: b.messages }));
    // kafkajs's own request timeout did not end a send over a path that hung without closing:
    // the relay waited on it for good (the simulation's kafka-hang). Past this deadline the
    // producer, and its connections, are replaced.
    const deadlineMs = 2 * (this.options.requestTimeoutMs ?? 30_000);
    try {
      const producer = await within(this.connectedProducer(), deadlineMs, 'connecting to Kafka');
      await within(producer.sendBatch({ topicMessages, acks: -1 }), deadlineMs, 'a Kafka send');
      this.failures = 0;
    } catch (thrown) {
      const error = toError(thrown);
      this.failures += 1;
      const types = kafkaErrorTypes(error);
      // The topic vanished (deleted by hand?): check it again, creating it, before the next send.
      if (types.includes('UNKNOWN_TOPIC_OR_PARTITION')) for (const b of batches) this.topics.delete(b.topic);
      const hung = error instanceof DeadlinePassed;
      if (hung || types.some((t) => PRODUCER_STATE_ERRORS.has(t)) || this.failures >= (this.options.resetAfterFailures ?? 5)) {
        this.logger.warn({ err: error, types, failures: this.failures }, 'replacing the Kafka producer');
        await this.resetProducer(generation);
      }
      throw error;
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    const producer = this.producer;
    this.producer = undefined;
    await Promise.all([producer?.then((p) => p.disconnect()).catch(() => undefined), this.admin.close()]);
  }

  private connectedProducer(): Promise<Producer> {
    if (!this.producer) {
      const producer = this.kafka.producer({
        idempotent: true,
        maxInFlightRequests: 1,
        allowAutoTopicCreation: false,
        // Every message names its partition; the partitioner is never consulted.
        createPartitioner: Partitioners.DefaultPartitioner,
      });
      const connecting = producer.connect().then(() => producer);
      this.producer = connecting;
      connecting.catch(() => {
        if (this.producer === connecting) this.producer = undefined;
        producer.disconnect().catch(() => undefined);
      });
    }
    return this.producer;
  }

  private async resetProducer(generation: number): Promise<void> {
    if (generation !== this.generation) return;
    this.generation += 1;
    const old = this.producer;
    this.producer = undefined;
    // A disconnect over a hung path may never end: it is not waited for past a few seconds.
    await within(old?.then((p) => p.disconnect()) ?? Promise.resolve(), 5000, 'a Kafka disconnect').catch(() => undefined);
  }
}
