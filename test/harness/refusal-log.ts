import type { Refusal } from '../../fakes/shared/stats.ts';
import { teeToTestLog } from './test-log.ts';

/**
 * A 429 the fake answered, into the file's service log: who sent the account's requests of the
 * second before it (by user agent: the sync's client or the customer's), and how they spread.
 */
export function logRefusal(refusal: Refusal): void {
  const byAgent = new Map<string, number>();
  for (const a of refusal.before) {
    const agent = a.agent.split(/[ /]/)[0] ?? a.agent;
    byAgent.set(agent, (byAgent.get(agent) ?? 0) + 1);
  }
  const at = refusal.refused.at;
  teeToTestLog(
    JSON.stringify({
      msg: 'fake Stripe answered 429',
      time: Date.now(),
      refused: `${refusal.refused.method} ${refusal.refused.path} (${refusal.refused.agent.split(' ')[0]})`,
      before: Object.fromEntries(byAgent),
      arrivalsMsBefore: refusal.before.map((a) => `${Math.round(at - a.at)} ${a.agent.split(/[ /]/)[0]} ${a.method} ${a.path}`),
    }),
    'fake-stripe',
  );
}
