import { type FakeStripe, type LateEventsSetting, startFakeStripe } from './index.ts';

export const DEFAULT_FAKE_STRIPE_KEY = `sk_test_FAKE${'0123456789abcdef'.repeat(6)}`;
export const DEFAULT_FAKE_STRIPE_ACCOUNT = 'acct_1FakeStripeDemo01';

/**
 * `tributary fake stripe --port N`: starts the fake with one generated account and prints how
 * to reach it. `connected`: that many connected accounts too (the account is then a Connect
 * platform), each generated with a tenth of the customers.
 */
export async function runFakeStripeCli(args: {
  port: number;
  seed?: number;
  customers?: number;
  connected?: number;
  key?: string;
  rateLimit?: false;
  /** A share of events listed only after a delay (Stripe's eventually consistent list). */
  lateEvents?: LateEventsSetting;
}): Promise<FakeStripe> {
  const fake = await startFakeStripe({
    port: args.port,
    ...(args.rateLimit === false ? { rateLimit: false } : {}),
    ...(args.lateEvents ? { lateEvents: args.lateEvents } : {}),
  });
  const key = args.key ?? DEFAULT_FAKE_STRIPE_KEY;
  const account = fake.createAccount({ id: DEFAULT_FAKE_STRIPE_ACCOUNT });
  const customers = args.customers ?? 100;
  const generated = account.generate({ seed: args.seed ?? 1, customers });
  fake.addKey(key, { account: account.id });
  const connected: string[] = [];
  for (let i = 0; i < (args.connected ?? 0); i++) {
    // Made as a platform makes them, through the API (Stripe has no other way).
    const answer = await fetch(`${fake.url}/v1/accounts`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/x-www-form-urlencoded' },
      body: `type=custom&email=owner${i + 1}%40shop.example.com`,
    });
    connected.push(((await answer.json()) as { id: string }).id);
  }
  for (const [i, control] of account.connectedAccounts().entries())
    control.generate({ seed: (args.seed ?? 1) * 1000 + i, customers: Math.max(1, Math.floor(customers / 10)) });
  const summary = { url: fake.url, key, account: account.id, apiVersion: account.apiVersion, generated, ...(connected.length > 0 ? { connected } : {}) };
  process.stdout.write(`${JSON.stringify(summary, null, 2)}\n`);
  return fake;
}
