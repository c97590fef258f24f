/**
 * A hostile tenant guessing credentials: thousands of wrong tries a second were accepted for
 * API tokens, event passwords and the console's sign-in, and an event username's existence
 * showed in the time a wrong password took. Failures are now throttled per client address and
 * per named account (429 with Retry-After, one log line per throttled key and minute), and a
 * wrong password costs the same whether the username exists or not.
 *
 * Sources are real: each client binds its own loopback address (127.0.0.x), so the service
 * sees distinct peers without trusting any header.
 */
import http from 'node:http';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { clientAddress } from '../src/http/client-address.ts';
import { query } from './harness/postgres.ts';
import { waitFor } from './harness/process.ts';
import { createAccount, loudSetUp, startTestService, type TestAccount, type TestService } from './harness/service.ts';

let svc: TestService;
let rest: string;
const accounts: Record<string, TestAccount> = {};

test.before(
  loudSetUp(
    async () => {
      svc = await startTestService();
      rest = `http://127.0.0.1:${svc.service.eventsPort}`;
      for (const name of ['alice', 'bob', 'carol', 'dave']) accounts[name] = await createAccount(svc, name);
    },
    () => svc,
  ),
);
test.after(async () => svc?.stop());

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: any;
  text: string;
  ms: number;
}

/** One request from a chosen local address (the service sees it as the client's). */
function send(url: string, options: { from: string; method?: string; headers?: Record<string, string>; body?: unknown; agent?: http.Agent }): Promise<Answer> {
  const payload = options.body === undefined ? undefined : JSON.stringify(options.body);
  const headers: Record<string, string> = { ...options.headers };
  if (payload !== undefined) headers['content-type'] = 'application/json';
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: options.method ?? 'GET', headers, localAddress: options.from, agent: options.agent ?? false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => {
        let body: unknown;
        try {
          body = text ? JSON.parse(text) : undefined;
        } catch {
          body = undefined;
        }
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body, text, ms: performance.now() - started });
      });
    });
    req.on('error', reject);
    req.end(payload);
  });
}

const basic = (username: string, password: string) => ({ authorization: `Basic ${Buffer.from(`${username}:${password}`).toString('base64')}` });
const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
const topics = (from: string, username: string, password: string) => send(`${rest}/topics`, { from, headers: basic(username, password) });

/** The service's log lines (JSON) that say a key was throttled. */
const throttleLines = () =>
  svc.logs.lines.map((line) => JSON.parse(line) as Record<string, unknown>).filter((line) => line.msg === 'failed credential checks throttled');

function retryAfter(answer: Answer, what: string): number {
  const seconds = Number(answer.headers['retry-after']);
  assert.ok(Number.isInteger(seconds) && seconds >= 1 && seconds <= 60, `${what}: Retry-After is whole seconds, got ${answer.headers['retry-after']}`);
  return seconds;
}

test('event REST: 10 wrong passwords from one address, then 429 with Retry-After and one log line; the right one elsewhere works at once', async () => {
  const { eventsUsername, eventsPassword } = accounts.alice!;
  const attacker = '127.0.0.11';
  for (let i = 0; i < 10; i++) assert.is((await topics(attacker, eventsUsername, `wrong-${i}`)).status, 401, `try ${i + 1} is checked`);
  // All at once: each refusal is held for its Retry-After (a second), in which the bucket refills a little.
  const refused: Answer[] = await Promise.all(Array.from({ length: 25 }, (_, i) => topics(attacker, eventsUsername, `wrong-again-${i}`)));
  for (const answer of refused) {
    assert.is(answer.status, 429, answer.text);
    assert.is(answer.body.status, 429, 'the Upstash error shape');
    assert.match(answer.body.error, /too many failed/);
    retryAfter(answer, 'event REST');
  }
  const lines = throttleLines().filter((line) => line.source === attacker);
  assert.is(lines.length, 1, `one log line for the throttled address, not one per try: ${JSON.stringify(lines)}`);
  assert.is(lines[0]!.via, 'event REST');
  assert.not.ok(JSON.stringify(lines).includes('wrong-'), 'no tried password in the log');

  // Another address with the right password is not slowed, and after that the account's own
  // credentials pass even from the throttled address (a consumer behind the attacker's NAT).
  const elsewhere = await topics('127.0.0.12', eventsUsername, eventsPassword);
  assert.is(elsewhere.status, 200, elsewhere.text);
  assert.is((await topics(attacker, eventsUsername, eventsPassword)).status, 200, 'known-good credentials are never throttled');
  assert.is((await topics(attacker, eventsUsername, 'wrong-once-more')).status, 429, 'but guesses from there still are');
});

test('management API and console sign-in: wrong tokens are throttled per address in their own error shape', async () => {
  const attacker = '127.0.0.21';
  for (let i = 0; i < 10; i++) {
    assert.is((await send(`${svc.api}/api/syncs`, { from: attacker, headers: bearer(`trb_guess${i}`) })).status, 401, `try ${i + 1}`);
  }
  const api = await send(`${svc.api}/api/syncs`, { from: attacker, headers: bearer('trb_guessagain') });
  assert.is(api.status, 429, api.text);
  assert.is(api.body.error.code, 'too_many_requests');
  assert.match(api.body.error.message, /too many failed/);
  retryAfter(api, 'management API');
  // The console's sign-in shares the address's allowance: no second round of guesses there.
  const signIn = await send(`${svc.api}/console/session`, { from: attacker, method: 'POST', body: { token: 'trb_guessviaconsole' } });
  assert.is(signIn.status, 429, signIn.text);
  assert.is(signIn.body.error.code, 'too_many_requests');
  assert.is(signIn.headers['set-cookie'], undefined);
  retryAfter(signIn, 'console sign-in');
  assert.is(throttleLines().filter((line) => line.source === attacker).length, 1);

  const right = await send(`${svc.api}/api/syncs`, { from: '127.0.0.22', headers: bearer(accounts.bob!.token) });
  assert.is(right.status, 200, right.text);
  const signedIn = await send(`${svc.api}/console/session`, { from: '127.0.0.22', method: 'POST', body: { token: accounts.bob!.token } });
  assert.is(signedIn.status, 200, signedIn.text);
  const unused = await createAccount(svc, 'frank');
  assert.is(
    (await send(`${svc.api}/api/syncs`, { from: attacker, headers: bearer(unused.token) })).status,
    429,
    'a token not yet used is not let through a throttled address',
  );
  assert.is((await send(`${svc.api}/api/syncs`, { from: attacker, headers: bearer(accounts.bob!.token) })).status, 200, 'a token in use is');
});

test('console sign-in on its own: 10 wrong tokens from one address, then 429', async () => {
  const attacker = '127.0.0.23';
  for (let i = 0; i < 10; i++) {
    const answer = await send(`${svc.api}/console/session`, { from: attacker, method: 'POST', body: { token: `trb_signin${i}` } });
    assert.is(answer.status, 401, answer.text);
  }
  const refused = await send(`${svc.api}/console/session`, { from: attacker, method: 'POST', body: { token: 'trb_signinagain' } });
  assert.is(refused.status, 429, refused.text);
  retryAfter(refused, 'console sign-in');
  const lines = throttleLines().filter((line) => line.source === attacker);
  assert.is(lines.length, 1);
  assert.is(lines[0]!.via, 'console sign-in');
});

test('a spread over many addresses is stopped per account (30) at those addresses, and unknown usernames alike', async () => {
  const { eventsUsername, eventsPassword } = accounts.carol!;
  // carol's consumer is at work before the attack.
  assert.is((await topics('127.0.0.39', eventsUsername, eventsPassword)).status, 200);
  let tries = 0;
  const spread = ['127.0.0.31', '127.0.0.32', '127.0.0.33', '127.0.0.34'];
  for (const from of spread) {
    for (let i = 0; i < 8 && tries < 30; i++, tries++) assert.is((await topics(from, eventsUsername, `spread-${tries}`)).status, 401, `try ${tries + 1}`);
  }
  // Each of the attacker's addresses is under its own allowance, but not under carol's. At
  // once: each refusal is held for its Retry-After, in which carol's allowance refills a little.
  const again = await Promise.all(spread.map((from) => topics(from, eventsUsername, 'spread-again')));
  for (const [i, answer] of again.entries()) {
    assert.is(answer.status, 429, `${spread[i]} is refused for carol: ${answer.text}`);
    retryAfter(answer, 'per account');
  }
  const line = throttleLines().find((entry) => entry.account === eventsUsername);
  assert.ok(line, 'the throttled account is logged');
  assert.is(line.source, undefined, 'the account line names no single address');
  assert.is((await topics('127.0.0.39', eventsUsername, eventsPassword)).status, 200, "carol's own consumer keeps working");
  assert.is((await topics('127.0.0.35', accounts.dave!.eventsUsername, accounts.dave!.eventsPassword)).status, 200, 'other accounts are untouched');

  // The same for a username no account has: the throttle tells nothing about existence.
  tries = 0;
  const others = ['127.0.0.36', '127.0.0.37', '127.0.0.38', '127.0.0.40'];
  for (const from of others) {
    for (let i = 0; i < 8 && tries < 30; i++, tries++) assert.is((await topics(from, 'ev_nosuchuser0', `x${tries}`)).status, 401);
  }
  assert.is((await topics(others[0]!, 'ev_nosuchuser0', 'x')).status, 429);
});

test('strangers spreading wrong passwords over many addresses cannot lock an account out from a new address', async () => {
  const { eventsUsername, eventsPassword } = accounts.bob!;
  // 20 wrong passwords a second, spread over four addresses, for three seconds: past bob's 30.
  const attackers = ['127.0.0.81', '127.0.0.82', '127.0.0.83', '127.0.0.84'];
  const statuses: number[] = [];
  for (let second = 0; second < 3; second++) {
    const started = Date.now();
    const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => topics(attackers[i % attackers.length]!, eventsUsername, `lockout-${second}-${i}`)));
    statuses.push(...answers.map((answer) => answer.status));
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, 1000 - (Date.now() - started))));
  }
  assert.ok(statuses.includes(429), 'the attack itself is throttled');
  assert.not.ok(statuses.includes(200), 'no guess got through');
  // bob, who never used his password before, from addresses of his own: let in every time.
  for (let i = 0; i < 8; i++) {
    const answer = await topics(`127.0.0.${90 + i}`, eventsUsername, eventsPassword);
    assert.is(answer.status, 200, `bob from a new address, try ${i + 1}: ${answer.text}`);
  }
});

test('a credential that passed before a restart still goes through a throttled address after it', async () => {
  const secretKeyBase64 = Buffer.alloc(32, 3).toString('base64');
  const before = await startTestService({ config: { secretKeyBase64 } });
  let after: TestService | undefined;
  try {
    const erin = await createAccount(before, 'erin');
    const restOf = (service: TestService) => `http://127.0.0.1:${service.service.eventsPort}/topics`;
    const from = '127.0.0.75';
    assert.is((await send(restOf(before), { from, headers: basic(erin.eventsUsername, erin.eventsPassword) })).status, 200);
    // Kept in the control database, not awaited by the check that passed.
    await waitFor(
      'the credential kept',
      async () => ((await query(before.controlUrl, 'SELECT 1 FROM credentials_known_good')).length > 0 ? true : undefined),
      5000,
    );
    await before.stop();
    after = await startTestService({ config: { secretKeyBase64, databaseUrl: before.controlUrl } });
    // Someone behind the same address as erin's consumer spends the address's allowance.
    for (let i = 0; i < 10; i++) assert.is((await send(restOf(after), { from, headers: basic(erin.eventsUsername, `nat-${i}`) })).status, 401);
    assert.is((await send(restOf(after), { from, headers: basic(erin.eventsUsername, 'nat-again') })).status, 429, 'the address is throttled');
    const consumer = await send(restOf(after), { from, headers: basic(erin.eventsUsername, erin.eventsPassword) });
    assert.is(consumer.status, 200, `erin's consumer, known good from before the restart: ${consumer.text}`);
  } finally {
    await after?.stop();
  }
});

test('guesses sent all at once cannot overdraw the allowance', async () => {
  const { eventsUsername } = accounts.dave!;
  const answers = await Promise.all(Array.from({ length: 40 }, (_, i) => topics('127.0.0.71', eventsUsername, `parallel-${i}`)));
  const statuses = answers.map((answer) => answer.status).sort();
  assert.equal(statuses, [...Array(10).fill(401), ...Array(30).fill(429)]);
});

test('X-Forwarded-For is not trusted by default: rotating it does not escape the throttle', async () => {
  const attacker = '127.0.0.51';
  const statuses: number[] = [];
  for (let i = 0; i < 12; i++) {
    const answer = await send(`${svc.api}/api/syncs`, { from: attacker, headers: { ...bearer(`trb_xff${i}`), 'x-forwarded-for': `203.0.113.${i + 1}` } });
    statuses.push(answer.status);
  }
  assert.equal(statuses, [...Array(10).fill(401), 429, 429]);
  assert.ok(throttleLines().some((line) => line.source === attacker));
});

test('the client address: the socket peer, or behind N reverse proxies the Nth X-Forwarded-For entry from the right', () => {
  const from = (remote: string, forwarded: string | undefined, hops: number) =>
    clientAddress({ remoteAddress: remote, forwardedFor: forwarded, reverseProxies: hops });
  assert.is(from('127.0.0.9', '198.51.100.7', 0), '127.0.0.9', 'not trusted unless the operator says so');
  assert.is(from('::ffff:10.0.0.2', undefined, 0), '10.0.0.2', 'an IPv4-mapped peer is its IPv4 address');
  assert.is(from('10.0.0.2', 'spoofed, 198.51.100.7', 1), '198.51.100.7', 'one proxy: its own entry, the rightmost');
  assert.is(from('10.0.0.2', 'spoofed, 198.51.100.7, 10.0.0.3', 2), '198.51.100.7');
  assert.is(from('10.0.0.2', undefined, 1), '10.0.0.2', 'no header: the peer');
  assert.is(from('10.0.0.2', 'not-an-address', 1), '10.0.0.2', 'a garbled entry: the peer');
  // IPv6 clients hold whole /64s: one prefix is one source.
  assert.is(from('2001:db8:1:2:aaaa::1', undefined, 0), '2001:db8:1:2::/64');
  assert.is(from('2001:db8:1:2:bbbb:cccc:dddd:eeee', undefined, 0), '2001:db8:1:2::/64');
  assert.is(from('::1', undefined, 0), '::1', 'loopback stays itself');
});

test('a wrong password takes as long for an unknown username as for a known, active one', async () => {
  // A second service, its throttle opened wide, so that every try is checked in full.
  const wide = await startTestService({ config: { failedCredentials: { perSource: 1_000_000, perAccount: 1_000_000 } } });
  try {
    const eve = await createAccount(wide, 'eve');
    const url = `http://127.0.0.1:${wide.service.eventsPort}/topics`;
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const call = (username: string, password: string) => send(url, { from: '127.0.0.61', headers: basic(username, password), agent });
    // An active consumer: its credentials were checked a moment ago.
    assert.is((await call(eve.eventsUsername, eve.eventsPassword)).status, 200);
    for (let i = 0; i < 30; i++) await call(i % 2 ? eve.eventsUsername : 'ev_zzzzzzzzzzzz', 'warming-up');
    const known: number[] = [];
    const unknown: number[] = [];
    for (let i = 0; i < 300; i++) {
      const first = i % 2 === 0;
      const a = await call(first ? eve.eventsUsername : 'ev_zzzzzzzzzzzz', `guess-${i}`);
      const b = await call(first ? 'ev_zzzzzzzzzzzz' : eve.eventsUsername, `guess-${i}`);
      assert.is(a.status, 401);
      assert.is(b.status, 401);
      (first ? known : unknown).push(a.ms);
      (first ? unknown : known).push(b.ms);
    }
    agent.destroy();
    const p50 = (values: number[]) => [...values].sort((x, y) => x - y)[Math.floor(values.length / 2)]!;
    const ratio = Math.max(p50(known), p50(unknown)) / Math.min(p50(known), p50(unknown));
    process.stdout.write(`  p50 known ${(p50(known) * 1000).toFixed(0)} µs, unknown ${(p50(unknown) * 1000).toFixed(0)} µs, ratio ${ratio.toFixed(2)}\n`);
    assert.ok(ratio < 1.3, `p50 known ${p50(known).toFixed(3)} ms vs unknown ${p50(unknown).toFixed(3)} ms: ratio ${ratio.toFixed(2)}`);
  } finally {
    await wide.stop();
  }
});

test.run();
