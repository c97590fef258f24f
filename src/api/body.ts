import type { Context } from 'koa';
import type { AnyZodObject, ZodType, ZodTypeDef } from 'zod';
import { TributaryError } from '../errors.ts';
import { issuesText } from '../validation.ts';
import { refuseNulInJson } from '../http/nul.ts';
import { z } from './zod.ts';

export const DEFAULT_BODY_LIMIT = 1024 * 1024;

/**
 * Reads a JSON body with a hard size limit. JSON types and a missing Content-Type are
 * taken; so is curl's default form type (`curl -d '{…}'`) when the body is JSON. Any
 * other type is refused so the mistake is named rather than guessed at.
 */
export async function readJson(ctx: Context, limit = DEFAULT_BODY_LIMIT): Promise<unknown> {
  // Before the type: a body too large is a 413 whatever it is.
  refuseDeclaredOver(ctx, limit);
  const type = ctx.get('content-type');
  const json = !type || /^application\/([a-z.+-]*\+)?json\b/i.test(type);
  const curlDefault = /^application\/x-www-form-urlencoded\b/i.test(type);
  if (!json && !curlDefault) {
    throw new TributaryError('unsupported_media_type', 'send the body as JSON with Content-Type: application/json');
  }
  const text = (await readBody(ctx, limit)).toString('utf8');
  if (text.trim() === '') return undefined;
  if (curlDefault && !/^\s*[[{]/.test(text)) {
    throw new TributaryError('unsupported_media_type', 'send the body as JSON with Content-Type: application/json');
  }
  let value: unknown;
  try {
    value = JSON.parse(text) as unknown;
  } catch (error) {
    throw new TributaryError('invalid_json', `the body is not valid JSON: ${(error as Error).message}`);
  }
  refuseNulInJson(value);
  return value;
}

/** The body's bytes as they came (a signature covers them exactly), refused past `limit`. */
export async function readBody(ctx: Context, limit: number): Promise<Buffer> {
  refuseDeclaredOver(ctx, limit);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of ctx.req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) tooLarge(ctx, limit);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

/** A Content-Length past `limit` is refused before a byte is read. */
function refuseDeclaredOver(ctx: Context, limit: number): void {
  if (Number(ctx.get('content-length') || 0) > limit) tooLarge(ctx, limit);
}

function tooLarge(ctx: Context, limit: number): never {
  ctx.set('Connection', 'close');
  throw new TributaryError('payload_too_large', `the body is larger than ${limit} bytes`);
}

/** Validates with a zod schema; the message names every offending field. */
export function validate<T>(schema: ZodType<T, ZodTypeDef, unknown>, value: unknown, what = 'body'): T {
  if (value === undefined) throw new TributaryError('invalid_request', `the request needs a JSON object ${what}`);
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  throw new TributaryError('invalid_request', issuesText(result.error.issues, what));
}

/** Validates the query string (a zod object of its parameters; the others are ignored). */
export const validateQuery = <S extends AnyZodObject>(schema: S, ctx: Context): z.output<S> => validate(schema, ctx.query, 'query');

/** A query parameter's errors, said in `message`; one given twice arrives as an array. */
export const queryErrors =
  (message: string): z.ZodErrorMap =>
  (issue) => ({
    message: issue.code === z.ZodIssueCode.invalid_type && issue.received === 'array' ? 'give it once' : message,
  });

/**
 * A whole-number query parameter from `min` to `max`, as a number. Documented as the integer
 * it stands for (a query string has only text).
 */
export function wholeNumber(min: number, max: number, unit?: string) {
  const message = `must be a whole number${unit ? ` of ${unit}` : ''} from ${min} to ${max}`;
  return z
    .string({ errorMap: queryErrors(message) })
    .refine((text) => /^\d+$/.test(text) && Number(text) >= min && Number(text) <= max, message)
    .transform(Number)
    .openapi({ type: 'integer', minimum: min, maximum: max });
}
