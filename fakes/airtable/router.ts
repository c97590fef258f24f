import { notFound } from './errors.ts';
import type { Answer, RequestContext } from './request-context.ts';
import { getSchema, listBases, patchField, patchTable, postField, postTable, whoami } from './routes-meta.ts';
import { createRecords, deleteOneRecord, deleteRecords, getRecord, listRecords, updateOneRecord, updateRecords } from './routes-records.ts';
import { webhookRoute } from './routes-webhooks.ts';

/** Maps method and path segments to a handler; unknown routes are Airtable's 404 NOT_FOUND. */
export function route(ctx: RequestContext): Answer {
  const s = ctx.segments;
  const m = ctx.method;
  const answer = dispatch(ctx, s, m);
  if (!answer) throw notFound();
  return answer;
}

function dispatch(ctx: RequestContext, s: string[], m: string): Answer | undefined {
  if (s[0] !== 'v0') return undefined;
  const [, a, b, c, d, e, f, g] = s;
  if (a === 'meta') {
    if (b === 'whoami' && s.length === 3 && m === 'GET') return whoami(ctx);
    if (b !== 'bases') return undefined;
    if (s.length === 3 && m === 'GET') return listBases(ctx);
    if (c === undefined || d !== 'tables') return undefined;
    if (s.length === 5) return m === 'GET' ? getSchema(ctx, c) : m === 'POST' ? postTable(ctx, c) : undefined;
    if (e === undefined) return undefined;
    if (s.length === 6 && m === 'PATCH') return patchTable(ctx, c, e);
    if (f !== 'fields') return undefined;
    if (s.length === 7 && m === 'POST') return postField(ctx, c, e);
    if (s.length === 8 && g !== undefined && m === 'PATCH') return patchField(ctx, c, e, g);
    return undefined;
  }
  if (a === 'bases') {
    if (b === undefined || c !== 'webhooks' || s.length > 6) return undefined;
    return webhookRoute(ctx, b, d, e);
  }
  if (a === undefined || b === undefined) return undefined;
  if (s.length === 3) {
    switch (m) {
      case 'GET':
        return listRecords(ctx, a, b, false);
      case 'POST':
        return createRecords(ctx, a, b);
      case 'PATCH':
      case 'PUT':
        return updateRecords(ctx, a, b, m === 'PUT');
      case 'DELETE':
        return deleteRecords(ctx, a, b);
      default:
        return undefined;
    }
  }
  if (s.length === 4 && c !== undefined) {
    if (c === 'listRecords' && m === 'POST') return listRecords(ctx, a, b, true);
    switch (m) {
      case 'GET':
        return getRecord(ctx, a, b, c);
      case 'PATCH':
      case 'PUT':
        return updateOneRecord(ctx, a, b, c, m === 'PUT');
      case 'DELETE':
        return deleteOneRecord(ctx, a, b, c);
      default:
        return undefined;
    }
  }
  return undefined;
}

/** The base a path talks about, for stats, fault matching and rate limits. */
export function baseIdOfPath(s: string[]): string | undefined {
  if (s[0] !== 'v0') return undefined;
  if (s[1] === 'meta') return s[2] === 'bases' ? s[3] : undefined;
  if (s[1] === 'bases') return s[2];
  return s[1];
}
