/** An error the fake answers with: Airtable's `{"error":{"type","message"}}` shape and a status. */
export class AirtableApiError extends Error {
  readonly status: number;
  readonly type: string;
  /** A body that replaces the usual shape (429 uses `{"errors":[…]}`). */
  readonly body: unknown;

  constructor(status: number, type: string, message: string, body?: unknown) {
    super(message);
    this.name = 'AirtableApiError';
    this.status = status;
    this.type = type;
    this.body = body ?? { error: { type, message } };
  }
}

export const NOT_FOUND_MESSAGE = 'Could not find what you are looking for';
export const PERMISSION_MESSAGE =
  'Invalid permissions, or the requested model was not found. Check that both your user and your token have the required permissions, and that the model names and/or ids are correct.';

export const notFound = (message = NOT_FOUND_MESSAGE) => new AirtableApiError(404, 'NOT_FOUND', message);
export const forbidden = () => new AirtableApiError(403, 'INVALID_PERMISSIONS_OR_MODEL_NOT_FOUND', PERMISSION_MESSAGE);
export const unprocessable = (type: string, message: string) => new AirtableApiError(422, type, message);
export const invalidRequest = (message: string) => unprocessable('INVALID_REQUEST_UNKNOWN', `Invalid request: ${message}`);

export const RATE_LIMIT_BODY = {
  errors: [{ error: 'RATE_LIMIT_REACHED', message: 'Rate limit exceeded. Please try again later' }],
};
export const rateLimited = () => new AirtableApiError(429, 'RATE_LIMIT_REACHED', 'Rate limit exceeded', RATE_LIMIT_BODY);
