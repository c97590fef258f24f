/**
 * The errors the fake answers with, in Stripe's envelope:
 * `{"error":{"code"?,"doc_url"?,"message","param"?,"request_log_url"?,"type"}}`.
 */
export type StripeErrorType = 'api_error' | 'card_error' | 'idempotency_error' | 'invalid_request_error';

export interface StripeErrorFields {
  code?: string;
  param?: string;
  /** Card errors carry these too. */
  decline_code?: string;
  charge?: string;
  payment_intent?: unknown;
}

export class StripeApiError extends Error {
  constructor(
    readonly status: number,
    readonly type: StripeErrorType,
    message: string,
    readonly fields: StripeErrorFields = {},
    /** A body that replaces the usual envelope (injected faults). */
    readonly body?: unknown,
  ) {
    super(message);
    this.name = 'StripeApiError';
  }

  /** The JSON body; request ids only exist once a request is being answered. */
  toBody(requestId: string | undefined, livemode: boolean): unknown {
    if (this.body !== undefined) return this.body;
    const { code, param, ...rest } = this.fields;
    const error: Record<string, unknown> = {};
    if (code) {
      error.code = code;
      error.doc_url = `https://stripe.com/docs/error-codes/${code.replace(/_/g, '-')}`;
    }
    Object.assign(error, rest);
    error.message = this.message;
    if (param) error.param = param;
    if (requestId) error.request_log_url = `https://dashboard.stripe.com/${livemode ? '' : 'test/'}logs/${requestId}?t=${Math.floor(Date.now() / 1000)}`;
    error.type = this.type;
    return { error };
  }
}

const HELP = 'Please see https://stripe.com/docs or we can help at https://support.stripe.com/.';

export const invalidRequest = (message: string, fields: StripeErrorFields = {}, status = 400) =>
  new StripeApiError(status, 'invalid_request_error', message, fields);

export const unrecognizedUrl = (method: string, path: string) =>
  new StripeApiError(404, 'invalid_request_error', `Unrecognized request URL (${method}: ${path}). ${HELP}`);

/** A real Stripe endpoint this fake does not implement: say so instead of pretending it is unknown. */
export const notImplemented = (method: string, path: string) =>
  new StripeApiError(
    404,
    'invalid_request_error',
    `Unrecognized request URL (${method}: ${path}). The local fake Stripe does not implement this endpoint. ${HELP}`,
  );

/** "No such customer: 'cus_x'"; `noun` is what Stripe calls the thing in that sentence. */
export const noSuch = (noun: string, id: string, param = 'id') =>
  new StripeApiError(404, 'invalid_request_error', `No such ${noun}: '${id}'`, { code: 'resource_missing', param });

export const unknownParam = (param: string) => invalidRequest(`Received unknown parameter: ${param}`, { code: 'parameter_unknown', param });

export const missingParam = (param: string) => invalidRequest(`Missing required param: ${param}.`, { code: 'parameter_missing', param });

export const NO_KEY_MESSAGE =
  "You did not provide an API key. You need to provide your API key in the Authorization header, using Bearer auth (e.g. 'Authorization: Bearer YOUR_SECRET_KEY'). See https://stripe.com/docs/api#authentication for details, or we can help at https://support.stripe.com/.";

/** sk_test_…abcd → sk_test_****abcd: the prefix, one star per hidden character, the last four. */
export function maskKey(key: string): string {
  const m = /^([a-z]{2}_(?:test|live)_)(.*)$/.exec(key);
  const prefix = m ? (m[1] as string) : '';
  const rest = m ? (m[2] as string) : key;
  if (rest.length <= 4) return prefix + rest;
  return prefix + '*'.repeat(rest.length - 4) + rest.slice(-4);
}

export const invalidKey = (key: string) => new StripeApiError(401, 'invalid_request_error', `Invalid API Key provided: ${maskKey(key)}`);

export const missingKey = () => new StripeApiError(401, 'invalid_request_error', NO_KEY_MESSAGE);

export const permissionDenied = (key: string, accountId: string, permission: string) =>
  new StripeApiError(
    403,
    'invalid_request_error',
    `The provided key '${maskKey(key)}' does not have the required permissions for this endpoint on account '${accountId}'. Having the '${permission}' permission would allow this request to continue.`,
  );

export const RATE_LIMIT_MESSAGE = 'Request rate limit exceeded. Learn more about rate limits here https://stripe.com/docs/rate-limits.';
export const rateLimited = () => new StripeApiError(429, 'invalid_request_error', RATE_LIMIT_MESSAGE, { code: 'rate_limit' });

export const idempotencyMismatch = (key: string) =>
  new StripeApiError(
    400,
    'idempotency_error',
    `Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than '${key}' if you meant to execute a different request.`,
  );

export const idempotencyOtherEndpoint = (key: string, first: string, now: string) =>
  new StripeApiError(
    400,
    'idempotency_error',
    `Keys for idempotent requests can only be used for the same endpoint they were first used for ('${first}' vs '${now}'). Try using a key other than '${key}' if you meant to execute a different request.`,
  );

/** A Stripe-like body for an injected status. */
export function faultError(status: number): StripeApiError {
  if (status === 429) return rateLimited();
  if (status >= 500) return new StripeApiError(status, 'api_error', 'An unknown error occurred. Please try again later.');
  if (status === 401) return new StripeApiError(401, 'invalid_request_error', 'Injected fault: authentication failed.');
  if (status === 402) return new StripeApiError(402, 'card_error', 'Your card was declined.', { code: 'card_declined', decline_code: 'generic_decline' });
  if (status === 404) return new StripeApiError(404, 'invalid_request_error', 'Injected fault: not found.', { code: 'resource_missing' });
  if (status === 409) return new StripeApiError(409, 'invalid_request_error', 'Injected fault: conflict.', { code: 'lock_timeout' });
  return new StripeApiError(status, 'invalid_request_error', `Injected fault: ${status}.`);
}
