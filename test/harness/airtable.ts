import { query } from './postgres.ts';
import { AIRTABLE_TEST_TOKEN, createAccount, request, type TestAccount, type TestService, waitOk } from './service.ts';
import { waitFor } from './process.ts';

/** Waits until a sync cycle that began after `after` has completed; returns the sync's view. */
export async function waitForCycle(svc: TestService, token: string, syncId: string, after: Date, timeoutMs = 60_000) {
  return waitFor(
    `a cycle of ${syncId} that began after ${after.toISOString()}`,
    async () => {
      const answer = await request(svc.api, 'GET', `/api/syncs/${syncId}`, { token });
      const status = answer.body?.status;
      if (!status?.completed_at) return undefined;
      const began = Date.parse(status.completed_at) - status.duration_last * 1000;
      return began >= after.getTime() ? answer.body : undefined;
    },
    timeoutMs,
  );
}

/** Polls a query until `accept` says yes; returns the rows and how long it took. */
export async function waitForRows<R extends Record<string, unknown>>(
  url: string,
  sql: string,
  accept: (rows: R[]) => boolean,
  timeoutMs = 20_000,
): Promise<{ rows: R[]; ms: number }> {
  const started = Date.now();
  const rows = await waitFor(
    `rows for ${sql}`,
    async () => {
      const rows = await query<R>(url, sql);
      return accept(rows) ? rows : undefined;
    },
    timeoutMs,
  );
  return { rows, ms: Date.now() - started };
}

/** airtable.js rejects with plain objects (no stack), which uvu cannot print: made Errors here. */
export const airtableJs = <T>(promise: Promise<T>): Promise<T> =>
  promise.catch((thrown: unknown) => {
    throw thrown instanceof Error ? thrown : new Error(`airtable.js: ${String(thrown)}`);
  });

/** A new account and an Airtable sync of `baseId` in it, once its first wait answers ok: the sync's id and database URL. */
export async function readyAirtableSync(
  svc: TestService,
  name: string,
  baseId: string,
): Promise<{ account: TestAccount; syncId: string; databaseUrl: string }> {
  const account = await createAccount(svc, name);
  const created = await request(svc.api, 'POST', '/api/syncs', {
    token: account.token,
    body: { kind: 'airtable', base_id: baseId, api_key: AIRTABLE_TEST_TOKEN },
  });
  if (created.status !== 201) throw new Error(`creating the sync: ${created.status} ${created.text}`);
  await waitOk(svc, account.token, created.body.id, 60_000);
  return { account, syncId: created.body.id, databaseUrl: created.body.database.url };
}
