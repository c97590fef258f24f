import { type FakeAirtable, startFakeAirtable } from './index.ts';

export const DEFAULT_FAKE_TOKEN = `patFAKE00000000000.${'0123456789abcdef'.repeat(4)}`;
/** Fixed, so that instructions written once (the README's tour) work against every run. */
export const DEFAULT_FAKE_BASE_ID = 'appTributaryDemo1';

/** Splits `records` over a few related tables: most in the first, the rest in smaller ones. */
function split(records: number): Array<{ name: string; records: number }> {
  const n = Math.max(0, Math.floor(records));
  const projects = Math.floor(n * 0.6);
  const tasks = Math.floor(n * 0.3);
  return [
    { name: 'Projects', records: projects },
    { name: 'Tasks', records: tasks },
    { name: 'People', records: n - projects - tasks },
  ];
}

/** `tributary fake airtable --port N --records N`: starts the fake with a "Demo" base and prints how to reach it. */
export async function runFakeAirtableCli(args: {
  port: number;
  records: number;
  seed?: number;
  token?: string;
  baseId?: string;
  rateLimit?: false;
}): Promise<FakeAirtable> {
  const fake = await startFakeAirtable({ port: args.port, ...(args.rateLimit === false ? { rateLimit: false } : {}) });
  const token = args.token ?? DEFAULT_FAKE_TOKEN;
  const base = fake.createBase({ id: args.baseId ?? DEFAULT_FAKE_BASE_ID, name: 'Demo' });
  const tables = base.generate({ seed: args.seed ?? 1, tables: split(args.records) });
  fake.addToken(token, { bases: [base.id] });
  const summary = {
    url: fake.url,
    token,
    baseId: base.id,
    tables: tables.map((t) => ({ id: t.id, name: t.name, records: base.recordCount(t.id) })),
  };
  process.stdout.write(`${JSON.stringify(summary, null, 2)}\n`);
  return fake;
}
