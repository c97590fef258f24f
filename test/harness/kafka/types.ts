/** The Kafka harness's public types; see index.ts. */

export interface KafkaBroker {
  /** PLAINTEXT bootstrap servers, e.g. ['127.0.0.1:40123']. Principal is ANONYMOUS, a super user. */
  brokers: string[];
  /** SASL_PLAINTEXT listener; SCRAM-SHA-256 only. Users other than adminUser have no rights until given ACLs. */
  saslBrokers: string[];
  /** The listener behind the caller's front (StartKafkaOptions.front), as advertised: PLAINTEXT, ANONYMOUS. */
  frontedBrokers?: string[];
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
  /**
   * A front for one more PLAINTEXT listener (a relay that can hang, in the simulation): called
   * with the port the broker listens on, it answers the port the broker advertises, so every
   * connection a client makes after its bootstrap goes through the front too.
   */
  front?: (port: number) => Promise<number>;
}
