import { required } from './command.ts';

/** Where a sync's webhooks are in the management API, and topics as the commands take them. */

export const webhooksPath = (sync: string | undefined, usage: string) => `/api/syncs/${encodeURIComponent(required(sync, `name the sync: ${usage}`))}/webhooks`;

export const webhookPath = (sync: string | undefined, webhook: string | undefined, usage: string) =>
  `${webhooksPath(sync, usage)}/${encodeURIComponent(required(webhook, `name the webhook: ${usage}`))}`;

/** A topic as given: a whole topic (svc.…), or a collection of the sync, which names its topic. */
export const topicOf = (sync: string, topic: string) => (topic.startsWith('svc.') ? topic : `svc.${sync}.${topic}`);
