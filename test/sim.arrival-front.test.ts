/**
 * The simulation's fakes count a request when it reaches them, even while their own event
 * loop is busy (the Airtable users' edits run there). A client in another thread sends four
 * requests while the fake's loop is blocked (two seconds) and three after it, never more than
 * four in any real second. Read straight, the fake stamps the four at the moment its loop
 * frees, sees six in a second and locks the base out; behind the arrival front, every request
 * is answered. The four are spread over 1.5 s: a loaded machine that fires the client's timers
 * up to half a second late still sends no more than five in a real second (once, sent over
 * 0.45 s, they came late enough to make six).
 */
import { Worker } from 'node:worker_threads';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { type FakeAirtable, startFakeAirtable } from '../fakes/airtable/index.ts';
import { type ArrivalFront, startArrivalFront } from '../sim/upstreams/arrival-front.ts';

const TOKEN = 'patArrival.0123456789abcdef';
let fake: FakeAirtable;
let front: ArrivalFront;

// The client: its own thread, so it sends on time while the test's thread is blocked.
const CLIENT = `
const { parentPort, workerData } = require('node:worker_threads');
const { url, token, path } = workerData;
const send = () => fetch(url + path, { headers: { authorization: 'Bearer ' + token } }).then((r) => r.status, () => 0);
parentPort.once('message', () => {
  const at = [50, 500, 1000, 1500, 2100, 2300, 2450];
  Promise.all(at.map((ms) => new Promise((resolve) => setTimeout(() => resolve(send()), ms)))).then((statuses) => parentPort.postMessage(statuses));
});
`;

/** The seven statuses, with this thread blocked for the first two seconds. */
async function sendWhileBusy(url: string, baseId: string): Promise<number[]> {
  const client = new Worker(CLIENT, { eval: true, execArgv: [], workerData: { url, token: TOKEN, path: `/v0/${baseId}/Items?maxRecords=1` } });
  const statuses = new Promise<number[]>((resolve, reject) => {
    client.once('message', resolve);
    client.once('error', reject);
  });
  client.postMessage('go');
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 2000);
  try {
    return await statuses;
  } finally {
    await client.terminate();
  }
}

function newBase(name: string): string {
  const base = fake.createBase({ name });
  base.createTable('Items', [{ name: 'Name', type: 'singleLineText' }]);
  return base.id;
}

test.before(async () => {
  fake = await startFakeAirtable({ trustArrivalStamps: true });
  fake.addToken(TOKEN, { bases: '*' });
  front = await startArrivalFront(fake.url);
});

test.after(async () => {
  await front?.close();
  await fake?.close();
});

test('read straight, a busy fake bunches arrivals and locks the base out', async () => {
  const statuses = await sendWhileBusy(fake.url, newBase('Straight'));
  assert.ok(statuses.includes(429), `statuses ${statuses.join(' ')}`);
});

test('behind the arrival front, the same requests are all answered', async () => {
  const statuses = await sendWhileBusy(front.url, newBase('Fronted'));
  assert.equal(statuses, [200, 200, 200, 200, 200, 200, 200]);
});

test('the front passes a cut answer on as cut, and a client that gives up frees the fake', async () => {
  const baseId = newBase('Faults');
  fake.faults.add({ match: { baseId }, kind: 'truncate', times: 1 });
  const cut = await fetch(`${front.url}/v0/${baseId}/Items`, { headers: { authorization: `Bearer ${TOKEN}` } })
    .then((r) => r.text())
    .then(
      () => 'whole',
      () => 'cut',
    );
  assert.is(cut, 'cut');
  fake.faults.add({ match: { baseId }, kind: 'hang', times: 1 });
  const hung = await fetch(`${front.url}/v0/${baseId}/Items`, { headers: { authorization: `Bearer ${TOKEN}` }, signal: AbortSignal.timeout(300) }).then(
    () => 'answered',
    (error: Error) => error.name,
  );
  assert.is(hung, 'TimeoutError');
  const after = await fetch(`${front.url}/v0/${baseId}/Items`, { headers: { authorization: `Bearer ${TOKEN}` } });
  assert.is(after.status, 200);
});

test.run();
