import type { Middleware } from 'koa';
import { ERROR_CODES, TributaryError, toError, type ErrorCode } from '../errors.ts';
import { AWAY_RETRY_AFTER_S, databaseAway } from '../db/transient.ts';
import { holdRefusal } from '../http/refusal-hold.ts';
import type { Logger } from '../log.ts';
import { z } from './zod.ts';

const codeOfStatus: Record<number, ErrorCode> = {
  400: 'invalid_request',
  401: 'unauthorized',
  403: 'forbidden',
  404: 'not_found',
  405: 'method_not_allowed',
  413: 'payload_too_large',
  415: 'unsupported_media_type',
  422: 'unprocessable',
};

/** Every error answer of the management API, whatever its status. */
export const errorAnswer = z
  .object({
    error: z
      .object({
        code: z.enum(ERROR_CODES).describe('Stable, for programs; the HTTP status follows from it'),
        message: z.string().describe('What went wrong, for people: names the offending field where there is one; never a stack trace'),
      })
      .strict(),
  })
  .strict()
  .openapi('Error');

const answer = (code: ErrorCode, message: string): z.infer<typeof errorAnswer> => ({ error: { code, message } });

/**
 * Turns everything thrown into `{"error":{"code","message"}}`. Only errors marked
 * `expose` show their message; the rest answer a bare 500 and are logged in full.
 */
export function errorMiddleware(logger: Logger): Middleware {
  return async (ctx, next) => {
    const started = performance.now();
    try {
      await next();
      if (ctx.status === 404 && ctx.body === undefined) {
        throw new TributaryError('not_found', `no route for ${ctx.method} ${ctx.path}`);
      }
    } catch (thrown) {
      const away = databaseAway(thrown);
      if (away) logger.warn({ method: ctx.method, path: ctx.path, error: (thrown as Error).message }, 'request answered 503: a database it needs is away');
      const error = away ?? toError(thrown);
      const httpStatus = (error as { status?: unknown }).status;
      if (error instanceof TributaryError && error.expose) {
        ctx.status = error.status;
        ctx.body = answer(error.code, error.message);
      } else if (typeof httpStatus === 'number' && httpStatus >= 400 && httpStatus < 500) {
        // Raised by Koa or the router themselves (a malformed URL, say).
        ctx.status = httpStatus;
        ctx.body = answer(codeOfStatus[httpStatus] ?? 'invalid_request', error.message);
      } else {
        logger.error({ err: error, method: ctx.method, path: ctx.path }, 'request failed');
        ctx.status = 500;
        ctx.body = answer('internal', 'internal error; see the service log');
      }
      if (ctx.status === 401) ctx.set('WWW-Authenticate', 'Bearer');
      if (error instanceof TributaryError && error.expose && error.retryAfterSeconds !== undefined) {
        ctx.set('Retry-After', String(error.retryAfterSeconds));
        await holdRefusal(error);
      } else if (ctx.status === 503) ctx.set('Retry-After', String(AWAY_RETRY_AFTER_S)); // every 503 says when to try again
    } finally {
      logger.debug({ method: ctx.method, path: ctx.path, status: ctx.status, ms: Math.round(performance.now() - started) }, 'request');
    }
  };
}
