/** Scripted misbehaviour for tests: wrong statuses, slowness, silence, cut bodies, lost iterators. */
export interface FaultRule {
  /** All given conditions must hold; `path` is tested against the URL path without the query. */
  match?: { method?: string; path?: RegExp; baseId?: string };
  kind: 'status' | 'delay' | 'hang' | 'truncate' | 'resetOffsets';
  status?: number;
  body?: unknown;
  delayMs?: number;
  /** How many matching requests the rule applies to; default 1, Infinity allowed. */
  times?: number;
}

export interface FaultInjector {
  add(rule: FaultRule): void;
  clear(): void;
}

export interface RequestFacts {
  method: string;
  path: string;
  baseId: string | undefined;
}

interface ActiveRule extends FaultRule {
  remaining: number;
}

export class FaultList implements FaultInjector {
  private rules: ActiveRule[] = [];

  add(rule: FaultRule): void {
    const times = rule.times ?? 1;
    if (!(times > 0)) throw new Error('fault times must be positive');
    if (rule.kind === 'status' && (rule.status === undefined || rule.status < 100 || rule.status > 599)) {
      throw new Error('a status fault needs a status between 100 and 599');
    }
    this.rules.push({ ...rule, remaining: times });
  }

  clear(): void {
    this.rules = [];
  }

  /** The first rule that matches the request, consumed once. */
  take(req: RequestFacts): FaultRule | undefined {
    const rule = this.rules.find((r) => {
      const m = r.match;
      if (!m) return true;
      if (m.method && m.method.toUpperCase() !== req.method) return false;
      if (m.baseId && m.baseId !== req.baseId) return false;
      if (m.path) {
        m.path.lastIndex = 0;
        if (!m.path.test(req.path)) return false;
      }
      return true;
    });
    if (!rule) return undefined;
    rule.remaining--;
    if (rule.remaining <= 0) this.rules = this.rules.filter((r) => r !== rule);
    return rule;
  }
}

const STATUS_TYPES: Record<number, string> = {
  400: 'INVALID_REQUEST_UNKNOWN',
  401: 'AUTHENTICATION_REQUIRED',
  403: 'INVALID_PERMISSIONS_OR_MODEL_NOT_FOUND',
  404: 'NOT_FOUND',
  413: 'REQUEST_TOO_LARGE',
  422: 'INVALID_REQUEST_UNKNOWN',
  500: 'SERVER_ERROR',
  502: 'BAD_GATEWAY',
  503: 'SERVICE_UNAVAILABLE',
  504: 'GATEWAY_TIMEOUT',
};

/** An Airtable-like error body for an injected status. */
export function faultBody(status: number): unknown {
  if (status === 429) return { errors: [{ error: 'RATE_LIMIT_REACHED', message: 'Rate limit exceeded. Please try again later' }] };
  const type = STATUS_TYPES[status] ?? (status >= 500 ? 'SERVER_ERROR' : 'INVALID_REQUEST_UNKNOWN');
  return { error: { type, message: `Injected fault: ${status}` } };
}
