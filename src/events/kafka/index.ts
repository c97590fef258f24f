/**
 * Kafka delivery (when KAFKA_BROKERS is set): the relay that publishes each
 * sync's event log, the process's shared publisher, and the accounts' SCRAM users and ACLs.
 */
export { KafkaAccess, accountGroupPrefix, syncTopicPrefix, type AccountCredentials, type AccountGrants, type KafkaAccessOptions } from './access.ts';
export { isLegalTopicName, parseKafkaBrokers, type KafkaConnectionOptions } from './config.ts';
export { deleteRelayCursor, loadRelayCursor } from './cursor.ts';
export { accountGrants } from './grants.ts';
export { createKafkaPublisher, type KafkaPublisher, type KafkaPublisherOptions } from './publisher.ts';
export { kafkaRelayRunner } from './runner.ts';
export { EVENT_ID_HEADER, startKafkaRelay, type KafkaRelay, type KafkaRelayOptions } from './relay.ts';
