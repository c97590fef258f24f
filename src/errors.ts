/**
 * One error type with stable codes. HTTP handlers expose only errors that are
 * marked `expose`; anything else becomes a generic 500 whose detail stays in the log.
 */
export type ErrorCode =
  | 'invalid_json'
  | 'invalid_request'
  | 'unauthorized'
  | 'forbidden'
  | 'waiting_list'
  | 'not_found'
  | 'method_not_allowed'
  | 'conflict'
  | 'payload_too_large'
  | 'unsupported_media_type'
  | 'unprocessable'
  | 'too_many_requests'
  | 'bad_gateway'
  | 'unavailable'
  | 'gateway_timeout'
  | 'internal';

const statusOf: Record<ErrorCode, number> = {
  invalid_json: 400,
  invalid_request: 400,
  unauthorized: 401,
  forbidden: 403,
  waiting_list: 403,
  not_found: 404,
  method_not_allowed: 405,
  conflict: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  unprocessable: 422,
  too_many_requests: 429,
  bad_gateway: 502,
  unavailable: 503,
  gateway_timeout: 504,
  internal: 500,
};

/** Every code, in the order above (the OpenAPI document lists them). */
export const ERROR_CODES = Object.keys(statusOf) as [ErrorCode, ...ErrorCode[]];

export class TributaryError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly expose: boolean;
  /** Sent as Retry-After (seconds) by the HTTP interfaces, for a 429 or a 503. */
  readonly retryAfterSeconds: number | undefined;

  constructor(code: ErrorCode, message: string, options: { cause?: unknown; expose?: boolean; retryAfterSeconds?: number } = {}) {
    super(message, { cause: options.cause });
    this.name = 'TributaryError';
    this.code = code;
    this.status = statusOf[code];
    this.expose = options.expose ?? this.status < 500;
    this.retryAfterSeconds = options.retryAfterSeconds;
  }
}

/** Everything thrown becomes an Error, so logging and `instanceof` checks stay simple. */
export function toError(thrown: unknown): Error {
  if (thrown instanceof Error) return thrown;
  return new Error(typeof thrown === 'string' ? thrown : JSON.stringify(thrown));
}

export const notFound = (what: string) => new TributaryError('not_found', `${what} not found`);
