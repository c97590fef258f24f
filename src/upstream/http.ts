import got, { type Method } from 'got';

export interface UpstreamResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** A network-level failure: nothing usable came back (refused, reset, timed out, cut short). */
export class UpstreamUnreachable extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'UpstreamUnreachable';
  }
}

/** How the service's own requests name themselves upstream (in Stripe's and Airtable's request logs). */
export const UPSTREAM_USER_AGENT = 'Tributary/1 (sync)';

/**
 * One HTTP exchange with an upstream API and no retries of its own: callers decide what
 * is worth retrying, because a retry costs quota.
 */
export async function exchange(request: {
  method: Method;
  url: string;
  headers?: Record<string, string>;
  body?: string;
  timeoutMs: number;
  signal?: AbortSignal;
  /**
   * The request's place in the upstream's rate limit (a quota grant, src/quota/grant.ts):
   * told when the request has been handed to the operating system (its last byte written),
   * the earliest the upstream can count it, and when its answer began or it failed, the
   * latest.
   */
  counted?: { sent(): void; answered(): void };
}): Promise<UpstreamResponse> {
  try {
    const pending = got(request.url, {
      method: request.method,
      headers: { 'user-agent': UPSTREAM_USER_AGENT, ...request.headers },
      body: request.body,
      throwHttpErrors: false,
      retry: { limit: 0 },
      followRedirect: false,
      decompress: true,
      timeout: { request: request.timeoutMs },
      signal: request.signal,
    });
    const counted = request.counted;
    if (counted) {
      pending.on('request', (req) => req.once('finish', () => counted.sent()));
      pending.on('response', () => counted.answered());
    }
    const response = await pending;
    return { status: response.statusCode, headers: response.headers, body: response.body };
  } catch (error) {
    request.counted?.answered();
    if (request.signal?.aborted) throw request.signal.reason;
    throw new UpstreamUnreachable(`${request.method} ${new URL(request.url).pathname}: ${(error as Error).message}`, { cause: error });
  }
}

/** The answer's JSON (undefined for an empty body); a cut-off or garbled body throws `unreadable`, never passes as empty. */
export function jsonOf(response: UpstreamResponse, unreadable: (cause: unknown) => Error): unknown {
  try {
    return response.body ? JSON.parse(response.body) : undefined;
  } catch (cause) {
    throw unreadable(cause);
  }
}

/** The base URL for an upstream host: TRIBUTARY_UPSTREAMS may point it at a local fake. */
export function upstreamBase(upstreams: Map<string, string>, host: string): string {
  return upstreams.get(host) ?? `https://${host}`;
}
