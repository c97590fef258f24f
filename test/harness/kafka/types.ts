/** The Kafka harness's public types; see index.ts. */

export interface KafkaBroker {
  /** PLAINTEXT bootstrap servers, e.g. ['127.0.0.1:40123']. Principal is ANONYMOUS, a super user. */
  brokers: string[];
  /** SASL_PLAINTEXT listener; SCRAM-SHA-256 only. Users other than adminUser have no rights until given ACLs. */
  saslBrokers: string[];
  /** SCRAM-SHA-256 super user created when the storage was formatted. */
  adminUser: { username: string; password: string };
  /** Stops the JVM and deletes the broker's temp dir. Idempotent. */
  stop(): Promise<void>;
  /** Stops the JVM and starts it again on the same ports and data dir. */
  restart(): Promise<void>;
}

export interface StartKafkaOptions {
  /** Receives harness progress messages and every broker log line. */
  log?: (line: string) => void;
}
