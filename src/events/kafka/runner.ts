import type { Runner } from '../../lease/worker.ts';
import { startKafkaRelay, type KafkaRelay, type KafkaRelayOptions } from './relay.ts';

/**
 * The Kafka relay of one sync as a leased runner, started beside the sync's decoder
 * (decoderFactory's `alongside`), so that exactly one relay per sync runs in the deployment.
 */
export function kafkaRelayRunner(options: Omit<KafkaRelayOptions, 'syncId'>): (syncId: string) => Promise<Runner> {
  return async (syncId) => {
    let relay: KafkaRelay | undefined;
    return {
      start: () => {
        relay = startKafkaRelay({ ...options, syncId });
      },
      stop: async () => {
        await relay?.stop();
      },
    };
  };
}
