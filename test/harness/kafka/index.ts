/**
 * Test harness: a real, single-node Apache Kafka broker (KRaft, combined
 * broker + controller) running in a child JVM.
 *
 * Kafka 3.9.1 is pinned on purpose: kafkajs 2.2.4 speaks old protocol
 * versions that Kafka 4.x removed (KIP-896), so 4.x cannot be used with it.
 *
 * The jars come from Maven Central through `mvn dependency:copy-dependencies`
 * the first time and are cached in `$TRIBUTARY_CACHE_DIR/kafka-3.9.1/libs`
 * (default `~/.cache/tributary/kafka-3.9.1/libs`). Every broker gets its own
 * temp dir (data, config, logs) and its own free ports.
 *
 * Set TRIBUTARY_KAFKA_LOG=1 to see the shared broker's log on stderr.
 *
 * Files: jars.ts (Maven fetch, cache, lock), config.ts (temp dir, ports,
 * server.properties, log4j, storage format), process.ts (the JVM), cleanup.ts
 * (killing JVMs the tests left behind), readiness.ts, broker.ts (entry points).
 */
export type { KafkaBroker, StartKafkaOptions } from './types.ts';
export { sharedKafka, startKafka } from './broker.ts';
