import { type FaultInjector as SharedFaultInjector, type FaultRuleBase, FaultList as SharedFaultList } from '../shared/faults.ts';

/** Scripted misbehaviour for tests: wrong statuses, slowness, silence, cut bodies, lost iterators. */
export interface FaultRule extends FaultRuleBase {
  /** All given conditions must hold; `path` is tested against the URL path without the query. */
  match?: { method?: string; path?: RegExp; baseId?: string };
  /**
   * 'delay' waits before making the answer; 'lateAnswer' makes it at once and sends it
   * `delayMs` later (a slow way back: the answer shows the base as it was when it arrived).
   */
  kind: 'status' | 'delay' | 'lateAnswer' | 'hang' | 'truncate' | 'resetOffsets';
}

export type FaultInjector = SharedFaultInjector<FaultRule>;

export interface RequestFacts {
  method: string;
  path: string;
  baseId: string | undefined;
}

/** The shared list, with Airtable's extra condition: the base the path names. */
export class FaultList extends SharedFaultList<FaultRule, RequestFacts> {
  constructor() {
    super((m, req) => !m.baseId || m.baseId === req.baseId);
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
