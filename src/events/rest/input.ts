import type http from 'node:http';
import { TributaryError } from '../../errors.ts';
import type { RestLimits } from './context.ts';

/** Parsing and checking of request bodies, query strings and Kafka-* headers: 400s that name the field. */

export interface TopicPartition {
  topic: string;
  partition: number;
}
export interface TopicPartitionOffset extends TopicPartition {
  offset: number;
}

export type OffsetReset = 'earliest' | 'latest' | 'none';
export interface ConsumerSettings {
  autoCommit: boolean;
  autoOffsetReset: OffsetReset;
  sessionTimeoutMs: number;
}

const MAX_NAME_LENGTH = 249; // Kafka's limit for topic names, used for group and instance ids too
const MAX_PARTITION = 2 ** 31 - 1;

const invalid = (message: string) => new TributaryError('invalid_request', message);

type Fields = Record<string, unknown>;

function isObject(value: unknown): value is Fields {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function requireObject(value: unknown, what: string): Fields {
  if (value === undefined) throw invalid(`the request needs a JSON body: ${what}`);
  if (!isObject(value)) throw invalid(`the request body must be a JSON object: ${what}`);
  return value;
}

export function name(value: unknown, field: string): string {
  if (typeof value !== 'string' || value.length === 0) throw invalid(`${field} must be a non-empty string`);
  if (value.length > MAX_NAME_LENGTH) throw invalid(`${field} must be at most ${MAX_NAME_LENGTH} characters`);
  if (/[\u0000-\u001f\u007f]/.test(value)) throw invalid(`${field} must not contain control characters`);
  return value;
}

function integer(value: unknown, field: string, max: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value)) throw invalid(`${field} must be an integer`);
  if (value < 0) throw invalid(`${field} must not be negative`);
  if (value > max) throw invalid(`${field} must be at most ${max}`);
  return value;
}

export const partitionOf = (value: unknown, field = 'partition') => integer(value, field, MAX_PARTITION);
export const offsetOf = (value: unknown, field = 'offset') => integer(value, field, Number.MAX_SAFE_INTEGER);

/** A long-poll timeout in ms: absent means the default, more than the cap is cut to it. */
export function timeoutOf(value: unknown, limits: RestLimits, field = 'timeout'): number {
  if (value === undefined || value === null) return Math.min(limits.defaultTimeoutMs, limits.maxTimeoutMs);
  if (typeof value !== 'number' || !Number.isFinite(value)) throw invalid(`${field} must be a number of milliseconds`);
  if (value < 0) throw invalid(`${field} must not be negative`);
  return Math.min(Math.floor(value), limits.maxTimeoutMs);
}

/** `?timeout=` of the path variants. */
export function queryTimeout(query: URLSearchParams, limits: RestLimits): number | undefined {
  const text = query.get('timeout');
  if (text === null) return undefined;
  if (!/^\d+$/.test(text.trim())) throw invalid('the timeout query parameter must be a non-negative integer (milliseconds)');
  return timeoutOf(Number(text), limits);
}

/** `field` inside `where` ("offsets[2].partition"); top-level fields (where = '') by their own name. */
const fieldIn = (where: string, field: string) => (where ? `${where}.${field}` : field);

export function topicPartition(value: unknown, where: string): TopicPartition {
  if (!isObject(value)) throw invalid(`${where || 'the body'} must be an object with topic and partition`);
  return { topic: name(value.topic, fieldIn(where, 'topic')), partition: partitionOf(value.partition, fieldIn(where, 'partition')) };
}

export function topicPartitionOffset(value: unknown, where: string): TopicPartitionOffset {
  if (!isObject(value)) throw invalid(`${where || 'the body'} must be an object with topic, partition and offset`);
  return { ...topicPartition(value, where), offset: offsetOf(value.offset, fieldIn(where, 'offset')) };
}

/** A single item or an array of them (Upstash takes both), bounded. */
export function oneOrMany<T>(value: unknown, limits: RestLimits, what: string, item: (v: unknown, where: string) => T): T[] {
  if (!Array.isArray(value)) return [item(value, '')];
  if (value.length > limits.maxPartitionsPerRequest) throw invalid(`at most ${limits.maxPartitionsPerRequest} ${what} per request`);
  return value.map((entry, i) => item(entry, `${what}[${i}]`));
}

export interface FetchRequest {
  targets: TopicPartitionOffset[];
  timeoutMs: number;
}

/** `{"topic","partition","offset","topicPartitionOffsets","timeout"}`: one triple, a set, or both. */
export function fetchRequest(body: unknown, limits: RestLimits): FetchRequest {
  const fields = requireObject(body, '{"topic","partition","offset","timeout"} or {"topicPartitionOffsets":[…]}');
  const targets: TopicPartitionOffset[] = [];
  if (fields.topic !== undefined) targets.push(topicPartitionOffset(fields, ''));
  else if (fields.partition !== undefined || fields.offset !== undefined) throw invalid('topic is required with partition and offset');
  if (fields.topicPartitionOffsets !== undefined) {
    if (!Array.isArray(fields.topicPartitionOffsets)) throw invalid('topicPartitionOffsets must be an array');
    targets.push(...oneOrMany(fields.topicPartitionOffsets, limits, 'topicPartitionOffsets', topicPartitionOffset));
  }
  if (targets.length === 0) throw invalid('name topic, partition and offset, or a non-empty topicPartitionOffsets');
  // The same partition twice: the first one asked for wins.
  const seen = new Set<string>();
  const unique = targets.filter((t) => {
    const key = `${t.partition}/${t.topic}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
  return { targets: unique, timeoutMs: timeoutOf(fields.timeout, limits) };
}

export interface ConsumeRequest {
  topics: string[];
  timeoutMs: number;
}

/** `{"topic"|"topics","timeout"}`, or the topic from the path with `?timeout=`. */
export function consumeRequest(body: unknown, pathTopic: string | undefined, queryTimeoutMs: number | undefined, limits: RestLimits): ConsumeRequest {
  if (pathTopic !== undefined) {
    // The path variant: a body is optional and may only add a timeout.
    const fields = body === undefined ? {} : requireObject(body, '{"timeout"}');
    return { topics: [name(pathTopic, 'the topic in the path')], timeoutMs: queryTimeoutMs ?? timeoutOf(fields.timeout, limits) };
  }
  const fields = requireObject(body, '{"topic"} or {"topics":[…]}, and optionally "timeout"');
  const topics: string[] = [];
  if (fields.topic !== undefined) topics.push(name(fields.topic, 'topic'));
  if (fields.topics !== undefined) {
    if (!Array.isArray(fields.topics)) throw invalid('topics must be an array of topic names');
    if (fields.topics.length > limits.maxPartitionsPerRequest) throw invalid(`at most ${limits.maxPartitionsPerRequest} topics per request`);
    for (const [i, topic] of fields.topics.entries()) topics.push(name(topic, `topics[${i}]`));
  }
  if (topics.length === 0) throw invalid('name a topic ("topic") or topics ("topics")');
  return { topics: [...new Set(topics)], timeoutMs: queryTimeoutMs ?? timeoutOf(fields.timeout, limits) };
}

function header(req: http.IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return (Array.isArray(value) ? value[0] : value)?.trim();
}

/** The Kafka-* headers that configure a new consumer instance (Upstash's names). */
export function consumerSettings(req: http.IncomingMessage, limits: RestLimits): ConsumerSettings {
  const autoCommitText = header(req, 'kafka-enable-auto-commit');
  let autoCommit = true;
  if (autoCommitText !== undefined) {
    const lower = autoCommitText.toLowerCase();
    if (lower !== 'true' && lower !== 'false') throw invalid('the Kafka-Enable-Auto-Commit header must be true or false');
    autoCommit = lower === 'true';
  }
  const resetText = header(req, 'kafka-auto-offset-reset')?.toLowerCase();
  if (resetText !== undefined && resetText !== 'earliest' && resetText !== 'latest' && resetText !== 'none') {
    throw invalid('the Kafka-Auto-Offset-Reset header must be earliest, latest or none');
  }
  const interval = header(req, 'kafka-auto-commit-interval');
  if (interval !== undefined && !/^\d+$/.test(interval)) {
    throw invalid('the Kafka-Auto-Commit-Interval header must be a non-negative integer (milliseconds)');
  }
  const sessionText = header(req, 'kafka-session-timeout-ms');
  let sessionTimeoutMs = limits.defaultSessionTimeoutMs;
  if (sessionText !== undefined) {
    if (!/^\d+$/.test(sessionText)) throw invalid('the Kafka-Session-Timeout-Ms header must be a positive integer (milliseconds)');
    sessionTimeoutMs = Math.min(Math.max(Number(sessionText), limits.minSessionTimeoutMs), limits.maxSessionTimeoutMs);
  }
  return { autoCommit, autoOffsetReset: resetText ?? 'latest', sessionTimeoutMs };
}

/** Commit bodies: none (or `[]`) commits the instance's positions; else one or many {topic,partition,offset}. */
export function commitRequest(body: unknown, limits: RestLimits): TopicPartitionOffset[] | undefined {
  if (body === undefined || (Array.isArray(body) && body.length === 0)) return undefined;
  if (!Array.isArray(body) && !isObject(body)) throw invalid('the commit body must be {"topic","partition","offset"} or an array of them');
  if (isObject(body) && Array.isArray(body.offsets)) return commitRequest(body.offsets, limits);
  return oneOrMany(body, limits, 'offsets', topicPartitionOffset);
}

export type CommittedRequest = { all: true } | { topics: string[] } | { partitions: TopicPartition[] };

/** Committed bodies: `[{topic,partition}]`, one of them, `{"topicPartitions":[…]}`, `{"topics":[…]}`, or none (all). */
export function committedRequest(body: unknown, limits: RestLimits): CommittedRequest {
  if (body === undefined || (Array.isArray(body) && body.length === 0)) return { all: true };
  if (Array.isArray(body)) return { partitions: oneOrMany(body, limits, 'topicPartitions', topicPartition) };
  if (!isObject(body)) throw invalid('the committed body must be {"topic","partition"}, an array of them, {"topicPartitions"} or {"topics"}');
  if (body.topicPartitions !== undefined) {
    if (!Array.isArray(body.topicPartitions)) throw invalid('topicPartitions must be an array');
    return { partitions: oneOrMany(body.topicPartitions, limits, 'topicPartitions', topicPartition) };
  }
  if (body.topics !== undefined) {
    if (!Array.isArray(body.topics)) throw invalid('topics must be an array of topic names');
    if (body.topics.length > limits.maxPartitionsPerRequest) throw invalid(`at most ${limits.maxPartitionsPerRequest} topics per request`);
    return { topics: body.topics.map((topic, i) => name(topic, `topics[${i}]`)) };
  }
  return { partitions: [topicPartition(body, '')] };
}
