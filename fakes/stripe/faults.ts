import { FaultList, type FaultInjector as SharedFaultInjector, type FaultRuleBase } from '../shared/faults.ts';

/**
 * Scripted misbehaviour: 'status' answers `status` with a Stripe error body (or `body`),
 * 'delay' waits `delayMs` before answering normally, 'late' answers as of the request's arrival
 * but sends that answer only `delayMs` later (a slow way back), 'hang' never answers,
 * 'truncate' sends half the body and drops the connection.
 */
export interface FaultRule extends FaultRuleBase {
  /** All given conditions must hold; `path` is a prefix of the URL path or a RegExp. */
  match?: { method?: string; path?: string | RegExp; account?: string; acting?: string };
  kind: 'status' | 'delay' | 'late' | 'hang' | 'truncate';
}

export type FaultInjector = SharedFaultInjector<FaultRule>;

export interface RequestFacts {
  method: string;
  path: string;
  /** The account the request's key belongs to, when the key is known. */
  account: string | undefined;
  /** The connected account named by Stripe-Account, if any. */
  acting: string | undefined;
}

export function stripeFaults(): FaultList<FaultRule, RequestFacts> {
  return new FaultList<FaultRule, RequestFacts>((m, req) => (!m.account || m.account === req.account) && (!m.acting || m.acting === req.acting));
}
