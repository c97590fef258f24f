import type { Runner } from '../../lease/worker.ts';
import { startWebhookDeliverer, type WebhookDeliverer, type WebhookDelivererOptions } from './deliverer.ts';

/** Webhook delivery for one sync as a leased runner, started beside the sync's decoder. */
export function webhookRunner(options: Omit<WebhookDelivererOptions, 'syncId'>): (syncId: string) => Promise<Runner> {
  return async (syncId) => {
    let deliverer: WebhookDeliverer | undefined;
    return {
      start: () => {
        deliverer = startWebhookDeliverer({ ...options, syncId });
      },
      stop: async () => {
        await deliverer?.stop();
      },
    };
  };
}
