import { createHash } from 'node:crypto';
import kafkajs, { type Kafka, type KafkaConfig, type LogEntry, type SASLOptions } from 'kafkajs';
import type { Logger } from '../../log.ts';

const { Kafka: KafkaClient, logLevel } = kafkajs;

/**
 * How Tributary reaches the Kafka cluster it publishes to (`KAFKA_BROKERS`).
 * The connection must be allowed to create topics, write to them, manage ACLs and SCRAM
 * users: a PLAINTEXT listener whose principal is a super user, or `sasl` credentials of one.
 */
export interface KafkaConnectionOptions {
  brokers: string[];
  clientId?: string;
  /** Credentials of Tributary's own (super) user, where the listener needs them. Never logged. */
  sasl?: { mechanism: 'scram-sha-256' | 'scram-sha-512' | 'plain'; username: string; password: string };
}

/** `KAFKA_BROKERS`: comma-separated `host:port`; undefined when unset or empty (no Kafka). */
export function parseKafkaBrokers(value: string | undefined): string[] | undefined {
  const brokers = (value ?? '')
    .split(',')
    .map((b) => b.trim())
    .filter(Boolean);
  return brokers.length > 0 ? brokers : undefined;
}

/** Kafka's rule for topic names: 1–249 of `[a-zA-Z0-9._-]`, not `.` or `..`. */
export function isLegalTopicName(topic: string): boolean {
  return /^[a-zA-Z0-9._-]{1,249}$/.test(topic) && topic !== '.' && topic !== '..';
}

/**
 * The Kafka name of a log topic. Collections may hold letters of any script (an Airtable table
 * called `Задачи`), which Kafka refuses; each other character becomes `_x<hex>_`, and a name
 * still too long is cut and given a hash. ASCII names, nearly all of them, stay as they are.
 */
export function kafkaTopicName(topic: string): string {
  if (isLegalTopicName(topic)) return topic;
  const escaped = [...topic].map((ch) => (/[a-zA-Z0-9._-]/.test(ch) ? ch : `_x${ch.codePointAt(0)!.toString(16)}_`)).join('');
  if (escaped.length <= 249) return escaped;
  return `${escaped.slice(0, 240)}.${createHash('sha1').update(topic).digest('hex').slice(0, 8)}`;
}

/**
 * kafkajs logs through the injected pino logger. Its errors are about single requests that
 * it or our own loops retry (a broker restart alone makes dozens); the loops log what matters
 * (what failed, for how long, the recovery), so kafkajs's own lines stay at debug and below.
 */
function logCreator(logger: Logger) {
  return () =>
    ({ namespace, level, log }: LogEntry) => {
      // Only the message and known scalar fields: kafkajs entries can carry request payloads.
      const { message, error, retryCount, retryTime, broker, topic } = log as Record<string, unknown>;
      const fields = { kafkajs: namespace, error, retryCount, retryTime, broker, topic };
      if (level === logLevel.ERROR || level === logLevel.WARN) logger.debug(fields, String(message));
      else logger.trace(fields, String(message));
    };
}

/** A kafkajs client for one part of the service (relay, access control), logging to `logger`. */
export function newKafkaClient(options: KafkaConnectionOptions, logger: Logger, extra: Partial<KafkaConfig> = {}): Kafka {
  const sasl: SASLOptions | undefined =
    options.sasl &&
    ({
      mechanism: options.sasl.mechanism,
      username: options.sasl.username,
      password: options.sasl.password,
    } as SASLOptions);
  return new KafkaClient({
    clientId: options.clientId ?? 'tributary',
    brokers: options.brokers,
    ...(sasl ? { sasl } : {}),
    // Only what the logger would print is produced at all.
    logLevel: logger.isLevelEnabled('trace') ? logLevel.INFO : logger.isLevelEnabled('debug') ? logLevel.WARN : logLevel.NOTHING,
    logCreator: logCreator(logger),
    ...extra,
  });
}
