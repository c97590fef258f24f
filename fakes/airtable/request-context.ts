import type { IncomingHttpHeaders } from 'node:http';
import type { Core } from './core.ts';
import { AirtableApiError, forbidden, rateLimited, unprocessable } from './errors.ts';
import type { BaseModel, User } from './model.ts';
import type { TokenEntry } from './tokens.ts';

export interface Answer {
  status: number;
  body: unknown;
}

/** One HTTP request, with the checks every route makes (auth, scope, rate limit, JSON body). */
export class RequestContext {
  constructor(
    readonly core: Core,
    readonly method: string,
    readonly segments: string[],
    readonly query: URLSearchParams,
    readonly headers: IncomingHttpHeaders,
    private readonly rawBody: Buffer,
    /** When the request reached the server: what the rate limit counts. */
    readonly arrivedAt = core.world.now(),
  ) {}

  /** Parsed JSON body; Airtable answers 422 INVALID_REQUEST_BODY for anything unparseable. */
  json(): unknown {
    const text = this.rawBody.toString('utf8');
    try {
      return JSON.parse(text) as unknown;
    } catch {
      throw unprocessable('INVALID_REQUEST_BODY', 'Could not parse request body');
    }
  }

  jsonObject(): Record<string, unknown> {
    const body = this.json();
    if (typeof body !== 'object' || body === null || Array.isArray(body)) {
      throw unprocessable('INVALID_REQUEST_BODY', 'The request body must be a JSON object');
    }
    return body as Record<string, unknown>;
  }

  private limit(key: 'base' | 'user', id: string, baseId: string | undefined): void {
    const limiter = this.core.limiters?.[key];
    if (!limiter) return;
    const ua = this.headers['user-agent'];
    const arrival = {
      key: key === 'base' ? id : `user ${id}`,
      at: this.arrivedAt,
      method: this.method,
      path: `/${this.segments.join('/')}`,
      agent: (Array.isArray(ua) ? ua[0] : ua) ?? '',
    };
    if (limiter.allow(id, this.arrivedAt)) return this.core.stats.refusals.arrived(arrival);
    this.core.stats.count(baseId, true);
    this.core.stats.refusals.refused(arrival);
    throw rateLimited();
  }

  /**
   * 401 without a known token, 429 past the rate of the token's user (all of its tokens
   * together, across bases) or of the base, 403 for a base the token can't see (or that
   * doesn't exist) and for a missing scope.
   */
  authorize(scope: string | null, baseId?: string): { token: TokenEntry; user: User; base: BaseModel | undefined } {
    const header = this.headers.authorization ?? '';
    const m = /^Bearer\s+(\S+)\s*$/i.exec(Array.isArray(header) ? (header[0] ?? '') : header);
    const token = m ? this.core.tokens.get(m[1] as string) : undefined;
    if (!token) throw new AirtableApiError(401, 'AUTHENTICATION_REQUIRED', 'Authentication required');
    this.limit('user', token.user.id, baseId);
    let base: BaseModel | undefined;
    if (baseId !== undefined) {
      base = this.core.world.bases.get(baseId);
      if (!base || !this.core.tokens.canSee(token, baseId)) throw forbidden();
      this.limit('base', baseId, baseId);
    }
    if (scope !== null && !token.scopes.has(scope)) throw forbidden();
    return { token, user: token.user, base };
  }
}
