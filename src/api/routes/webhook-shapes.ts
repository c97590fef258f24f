import type { SyncRecord } from '../../control/syncs.ts';
import type { WebhookDestination } from '../../events/webhooks/destinations.ts';
import { time } from '../views.ts';
import { webhookFilterSchema } from '../webhook-filter.ts';
import { z } from '../zod.ts';
import { syncParams } from './syncs.ts';
import { backfillAnswer } from './backfills.ts';

/** What the webhook routes share: the fields a request names and the webhook as answered. */

export const MAX_TOPICS_PER_WEBHOOK = 100;
export const MAX_PER_SECOND = 10_000;

export const destinationUrl = z
  .string()
  .max(2048)
  .superRefine((value, ctx) => {
    let url: URL;
    try {
      url = new URL(value);
    } catch {
      ctx.addIssue({ code: z.ZodIssueCode.custom, message: 'must be an absolute http:// or https:// URL' });
      return;
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') {
      ctx.addIssue({ code: z.ZodIssueCode.custom, message: `must be http:// or https:// (got ${url.protocol.replace(/:$/, '')})` });
    } else if (url.username || url.password) {
      ctx.addIssue({ code: z.ZodIssueCode.custom, message: 'must not contain credentials (user:password@); put a token in the path or query instead' });
    } else if (!url.hostname) {
      ctx.addIssue({ code: z.ZodIssueCode.custom, message: 'must name a host' });
    }
  })
  .describe('Where events are POSTed: http:// or https://, on a public address unless the operator allows private ones');

export const topicList = z
  .array(z.string().max(300).describe('`svc.<sync id>.<collection>`: a topic of this sync'))
  .min(1, 'at least one topic')
  .max(MAX_TOPICS_PER_WEBHOOK, `at most ${MAX_TOPICS_PER_WEBHOOK} topics`);

export const maxPerSecond = z
  .number()
  .int('must be a whole number')
  .min(1, `must be from 1 to ${MAX_PER_SECOND}`)
  .max(MAX_PER_SECOND, `must be from 1 to ${MAX_PER_SECOND}`)
  .nullable()
  .describe('Attempts per second at most, across all its lanes (retries included); null: as fast as its lanes go');

export const filterField = webhookFilterSchema.nullable();

/** Each topic must be one of this sync's: `svc.<sync id>.<collection>`. */
export function checkTopics(sync: SyncRecord, topics: string[] | undefined, ctx: z.RefinementCtx): void {
  const prefix = `svc.${sync.id}.`;
  topics?.forEach((topic, i) => {
    const path = ['topics', i];
    if (!topic.startsWith(prefix)) ctx.addIssue({ code: z.ZodIssueCode.custom, path, message: `must be a topic of this sync: ${prefix}<collection>` });
    else if (!/^[^\s\p{Cc}*]+$/u.test(topic.slice(prefix.length)))
      ctx.addIssue({ code: z.ZodIssueCode.custom, path, message: `must name a collection after ${prefix}` });
  });
}

export const webhookParams = syncParams.extend({ wid: z.string().describe('The webhook (`wh_…`)') });

export const webhookFields = {
  id: z.string().describe('`wh_…`'),
  url: z.string(),
  topics: z.array(z.string()),
  filter: filterField,
  max_per_second: z.number().int().nullable(),
  state: z.enum(['enabled', 'disabled']).describe('A disabled webhook is sent nothing; enabled again, it resumes where it stopped'),
  disabled_reason: z.string().nullable().describe('Why it is disabled: it answered 410 Gone, every attempt failed for days, or by request'),
  disabled_at: time.nullable(),
  previous_secret_expires_at: time
    .nullable()
    .describe('After a secret rotation: until when deliveries are also signed with the secret before it; null when they are not'),
  created_at: time,
};

export const webhookAnswer = z.object(webhookFields).strict().openapi('Webhook');

export const createdWebhookAnswer = z
  .object({
    ...webhookFields,
    secret: z.string().describe('Signs every delivery (Standard Webhooks); shown in this answer only'),
    backfill: backfillAnswer.optional().describe('With `"backfill": true`: the backfill of its topics, for it alone'),
  })
  .strict()
  .openapi('NewWebhook');

export function webhookView(destination: WebhookDestination, now = new Date()): z.infer<typeof webhookAnswer> {
  const previousUntil = destination.previousSecretUntil;
  return {
    id: destination.id,
    url: destination.url,
    topics: destination.topics,
    filter: destination.filter,
    max_per_second: destination.maxPerSecond,
    state: destination.disabledAt ? 'disabled' : 'enabled',
    disabled_reason: destination.disabledReason,
    disabled_at: destination.disabledAt?.toISOString() ?? null,
    previous_secret_expires_at: previousUntil && previousUntil > now ? previousUntil.toISOString() : null,
    created_at: destination.createdAt.toISOString(),
  };
}
