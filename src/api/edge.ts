import type { Middleware } from 'koa';
import { refuseNulInUrl as refuse } from '../http/nul.ts';

/** A NUL byte anywhere in the URL is a 400 before any route sees it (http/nul.ts says why). */
export const refuseNulInUrl: Middleware = async (ctx, next) => {
  refuse(ctx.url);
  await next();
};
