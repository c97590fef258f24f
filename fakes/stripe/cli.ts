import { type FakeStripe, startFakeStripe } from './index.ts';

export const DEFAULT_FAKE_STRIPE_KEY = `sk_test_FAKE${'0123456789abcdef'.repeat(6)}`;
export const DEFAULT_FAKE_STRIPE_ACCOUNT = 'acct_1FakeStripeDemo01';

/** `tributary fake stripe --port N`: starts the fake with one generated account and prints how to reach it. */
export async function runFakeStripeCli(args: { port: number; seed?: number; customers?: number; key?: string; rateLimit?: false }): Promise<FakeStripe> {
  const fake = await startFakeStripe({ port: args.port, ...(args.rateLimit === false ? { rateLimit: false } : {}) });
  const key = args.key ?? DEFAULT_FAKE_STRIPE_KEY;
  const account = fake.createAccount({ id: DEFAULT_FAKE_STRIPE_ACCOUNT });
  const generated = account.generate({ seed: args.seed ?? 1, customers: args.customers ?? 100 });
  fake.addKey(key, { account: account.id });
  process.stdout.write(`${JSON.stringify({ url: fake.url, key, account: account.id, apiVersion: account.apiVersion, generated }, null, 2)}\n`);
  return fake;
}
