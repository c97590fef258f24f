import type { Middleware } from 'koa';
import { TributaryError } from '../errors.ts';

/**
 * A NUL byte anywhere in the URL (raw or `%00`, in the path or the query) is a 400 before any
 * route sees it: ids and names go into PostgreSQL text, which cannot hold one, and the
 * statement's failure would be a bare 500.
 */
export const refuseNulInUrl: Middleware = async (ctx, next) => {
  if (ctx.url.includes('\0') || /%00/i.test(ctx.url)) throw new TributaryError('invalid_request', 'the URL may not contain a NUL byte (%00)');
  await next();
};
