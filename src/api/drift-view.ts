import { type DriftStatus, NO_DRIFT } from '../control/drift.ts';
import { z } from './zod.ts';

const time = z.string().datetime();

const counts = {
  missing: z.number().int().describe('Rows the upstream had that the table did not (inserted)'),
  differing: z.number().int().describe("Rows the table held unlike the upstream's (updated)"),
  extra: z.number().int().describe('Rows the table held that the upstream no longer had (deleted)'),
};

/** The sync view's `drift`: what comparisons with the upstream found that change capture had not brought, each fixed. */
export const driftAnswer = z
  .object({
    audit: z
      .object({
        share_per_second: z.number().int().describe("Requests a second the audit may make: its share of the upstream's limit, after clients and the feed"),
        round_started_at: time.describe('When the round under way (or the last one) began'),
        last_started_at: time.nullable().describe('When the last completed round began; null: none completed yet'),
        last_completed_at: time.nullable().describe('When it ended'),
        last_round_seconds: z.number().nullable().describe('How long it took'),
      })
      .strict()
      .nullable()
      .describe("A Stripe sync's continuous audit (docs/stripe.md#the-audit); null for other kinds, or before its first round"),
    last_24h: z.object(counts).strict().describe('Drift found and fixed in the last 24 hours, all tables together'),
    tables: z
      .array(
        z
          .object({
            table: z.string(),
            compared_at: time
              .nullable()
              .describe('When the table was last compared whole with the upstream; null: only its rows held inline in another table were'),
            ...counts,
          })
          .strict(),
      )
      .describe('By table: the last comparison, and the drift of the last 24 hours'),
  })
  .strict()
  .describe('What comparing the database with the upstream found that change capture had missed, and fixed (Stripe: the audit; Airtable: the sweeps)');

export function driftView(drift: DriftStatus | undefined): z.infer<typeof driftAnswer> {
  return {
    audit: drift?.audit
      ? {
          share_per_second: drift.audit.sharePerSecond,
          round_started_at: drift.audit.roundStartedAt.toISOString(),
          last_started_at: drift.audit.lastStartedAt?.toISOString() ?? null,
          last_round_seconds: drift.audit.lastRoundMs === null ? null : drift.audit.lastRoundMs / 1000,
          last_completed_at: drift.audit.lastCompletedAt?.toISOString() ?? null,
        }
      : null,
    last_24h: drift?.last24h ?? { ...NO_DRIFT },
    tables: (drift?.tables ?? []).map((t) => ({
      table: t.table,
      compared_at: t.comparedAt?.toISOString() ?? null,
      missing: t.missing,
      differing: t.differing,
      extra: t.extra,
    })),
  };
}
