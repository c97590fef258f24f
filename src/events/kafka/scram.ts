import { pbkdf2Sync, randomBytes } from 'node:crypto';
import type { Connection, ConnectionOptions } from '@platformatic/kafka';
import { toError } from '../../errors.ts';
import type { KafkaConnectionOptions } from './config.ts';

/**
 * SCRAM-SHA-256 users on the Kafka cluster (KIP-554's AlterUserScramCredentials, which
 * kafkajs does not speak; @platformatic/kafka's protocol layer does, and is used for this
 * alone). The broker receives only a salt and the salted password, never the password.
 */

/**
 * The package's entry point loads its whole client (about 55 MB of resident memory on Node
 * 24), so it is loaded on first use: a service without Kafka never pays for it.
 */
type Protocol = typeof import('@platformatic/kafka');
let protocol: Promise<Protocol> | undefined;

/** Kafka's minimum for SCRAM-SHA-256; the client repeats the derivation at every login. */
const ITERATIONS = 4096;
const SALT_BYTES = 32;

export interface ScramUser {
  username: string;
  password: string;
}

/** Kafka's SCRAM formatter uses the password's UTF-8 bytes as they are (no SASLprep). */
function saltedPassword(password: string, salt: Buffer, iterations: number): Buffer {
  return pbkdf2Sync(Buffer.from(password, 'utf8'), salt, iterations, 32, 'sha256');
}

/** Creates or replaces the SCRAM-SHA-256 credentials of `users`. Idempotent. */
export async function upsertScramUsers(options: KafkaConnectionOptions, users: ScramUser[]): Promise<void> {
  if (users.length === 0) return;
  await withConnection(options, (connection, { alterUserScramCredentialsV0, ScramMechanisms }) => {
    const upsertions = users.map((u) => {
      const salt = randomBytes(SALT_BYTES);
      return {
        name: u.username,
        mechanism: ScramMechanisms.SCRAM_SHA_256,
        iterations: ITERATIONS,
        salt,
        saltedPassword: saltedPassword(u.password, salt, ITERATIONS),
      };
    });
    return alterUserScramCredentialsV0.api.async(connection, [], upsertions);
  });
}

/** Removes the SCRAM-SHA-256 credentials of `usernames`; users without any are skipped. */
export async function deleteScramUsers(options: KafkaConnectionOptions, usernames: string[]): Promise<void> {
  for (const name of usernames) {
    await withConnection(options, async (connection, { alterUserScramCredentialsV0, ScramMechanisms }) => {
      try {
        await alterUserScramCredentialsV0.api.async(connection, [{ name, mechanism: ScramMechanisms.SCRAM_SHA_256 }], []);
      } catch (error) {
        if (!isResourceNotFound(error)) throw error;
      }
    });
  }
}

/** Whether `username` has a SCRAM-SHA-256 credential on the broker we reach. */
export async function hasScramUser(options: KafkaConnectionOptions, username: string): Promise<boolean> {
  return withConnection(options, async (connection, { describeUserScramCredentialsV0, ScramMechanisms }) => {
    try {
      const response = await describeUserScramCredentialsV0.api.async(connection, [{ name: username }]);
      return response.results.some((r) => r.user === username && r.credentialInfos.some((c) => c.mechanism === ScramMechanisms.SCRAM_SHA_256));
    } catch (error) {
      if (isResourceNotFound(error)) return false;
      throw error;
    }
  });
}

/** "No such user" comes back as RESOURCE_NOT_FOUND, inside an aggregate of per-user errors. */
function isResourceNotFound(error: unknown): boolean {
  const errors = (error as { errors?: unknown[] }).errors ?? [error];
  return errors.length > 0 && errors.every((e) => (e as { apiId?: string }).apiId === 'RESOURCE_NOT_FOUND');
}

/** One short-lived connection to the first bootstrap broker that answers. */
async function withConnection<T>(options: KafkaConnectionOptions, work: (connection: Connection, kafka: Protocol) => Promise<T>): Promise<T> {
  const kafka = await (protocol ??= import('@platformatic/kafka'));
  let lastError: Error | undefined;
  for (const address of options.brokers) {
    const { host, port } = splitAddress(address);
    const connection = new kafka.Connection(options.clientId ?? 'tributary', connectionOptions(options));
    // An 'error' event without a listener would throw; failures surface through the promises.
    connection.on('error', () => undefined);
    try {
      await connection.connect(host, port);
    } catch (error) {
      lastError = toError(error);
      await connection.close().catch(() => undefined);
      continue;
    }
    try {
      return await work(connection, kafka);
    } finally {
      await connection.close().catch(() => undefined);
    }
  }
  throw lastError ?? new Error('no Kafka brokers configured');
}

function connectionOptions(options: KafkaConnectionOptions): ConnectionOptions {
  const base: ConnectionOptions = { connectTimeout: 5_000, requestTimeout: 30_000 };
  if (!options.sasl) return base;
  const mechanism = ({ 'scram-sha-256': 'SCRAM-SHA-256', 'scram-sha-512': 'SCRAM-SHA-512', plain: 'PLAIN' } as const)[options.sasl.mechanism];
  return { ...base, sasl: { mechanism, username: options.sasl.username, password: options.sasl.password } };
}

function splitAddress(address: string): { host: string; port: number } {
  const at = address.lastIndexOf(':');
  if (at <= 0) return { host: address, port: 9092 };
  return { host: address.slice(0, at).replace(/^\[|\]$/g, ''), port: Number(address.slice(at + 1)) };
}
