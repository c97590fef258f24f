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
   * Called once the request has been handed to the operating system (its last byte written):
   * the moment the upstream's rate limit begins to count it. A quota grant restamps itself
   * then, so a request held up between its grant and the wire is counted when it really left.
   */
  onSent?: () => void;
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
    const onSent = request.onSent;
    if (onSent) pending.on('request', (req) => req.once('finish', onSent));
    const response = await pending;
    return { status: response.statusCode, headers: response.headers, body: response.body };
  } catch (error) {
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
