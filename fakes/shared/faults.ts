/** Scripted misbehaviour for tests, shared by the fakes: wrong statuses, slowness, silence, cut bodies. */

/** A path condition: a string matches as a prefix of the URL path (no query), a RegExp by test(). */
export type PathMatch = string | RegExp;

export interface FaultRuleBase {
  /** All given conditions must hold. */
  match?: { method?: string; path?: PathMatch };
  kind: string;
  status?: number;
  body?: unknown;
  delayMs?: number;
  /** How many matching requests the rule applies to; default 1, Infinity allowed. */
  times?: number;
}

export interface FaultInjector<R extends FaultRuleBase> {
  add(rule: R): void;
  clear(): void;
  /** Rules not used up yet. */
  readonly active: number;
}

export interface RequestFactsBase {
  method: string;
  path: string;
}

export function pathMatches(match: PathMatch | undefined, path: string): boolean {
  if (match === undefined) return true;
  if (typeof match === 'string') return path.startsWith(match);
  match.lastIndex = 0;
  return match.test(path);
}

/**
 * The active rules, first match wins. `extra` checks the conditions a fake adds to `match`
 * (Airtable's base id, Stripe's account).
 */
export class FaultList<R extends FaultRuleBase, F extends RequestFactsBase = RequestFactsBase> implements FaultInjector<R> {
  private rules: Array<{ rule: R; remaining: number }> = [];

  constructor(private readonly extra?: (match: NonNullable<R['match']>, facts: F) => boolean) {}

  add(rule: R): void {
    const times = rule.times ?? 1;
    if (!(times > 0)) throw new Error('fault times must be positive');
    if (rule.kind === 'status' && (rule.status === undefined || rule.status < 100 || rule.status > 599)) {
      throw new Error('a status fault needs a status between 100 and 599');
    }
    this.rules.push({ rule: { ...rule }, remaining: times });
  }

  clear(): void {
    this.rules = [];
  }

  /** Rules not used up yet (a test waits for 0 to know its fault has been met). */
  get active(): number {
    return this.rules.length;
  }

  /** The first rule that matches the request, consumed once. */
  take(facts: F): R | undefined {
    const active = this.rules.find(({ rule }) => {
      const m = rule.match;
      if (!m) return true;
      if (m.method && m.method.toUpperCase() !== facts.method) return false;
      if (!pathMatches(m.path, facts.path)) return false;
      return this.extra ? this.extra(m as NonNullable<R['match']>, facts) : true;
    });
    if (!active) return undefined;
    active.remaining--;
    if (active.remaining <= 0) this.rules = this.rules.filter((r) => r !== active);
    return active.rule;
  }
}
