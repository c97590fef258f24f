/**
 * The simulation's client actors (sim/traffic/clients.ts) against an upstream that cuts every
 * answer short: headers that promise a body, half of it, then a dropped socket. airtable.js
 * reads the body with no deadline (its requestTimeout ends at the headers), so without a bound
 * of the client's own such a write never settles, and the actor never stops at the end of the
 * traffic: the simulation then waits for it forever.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { Pacer } from '../sim/pacer.ts';
import { Random } from '../sim/random.ts';
import { AirtableClient } from '../sim/traffic/clients.ts';
import type { Violation } from '../sim/types.ts';
import { pause } from '../src/time.ts';

/** Answers every request with half of a JSON body and a dropped socket. */
async function cuttingUpstream(): Promise<{ url: string; requests: () => number; close(): Promise<void> }> {
  let requests = 0;
  const server = http.createServer((req, res) => {
    requests++;
    req.resume();
    const body = Buffer.from(JSON.stringify({ id: 'recCUT00000000001', createdTime: new Date().toISOString(), fields: { Name: 'cut' } }));
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length });
    res.write(body.subarray(0, body.length >> 1), () => res.socket?.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    requests: () => requests,
    close: () => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

test('the Airtable client gives up on an answer cut short, and stops soon after the abort', async () => {
  const upstream = await cuttingUpstream();
  // Never reached: no write succeeds, so nothing is read back.
  const reader = new pg.Pool({ connectionString: 'postgres://nobody@127.0.0.1:1/none' });
  const violations: Violation[] = [];
  const lines: string[] = [];
  const client = new AirtableClient({
    random: new Random(7),
    pacer: new Pacer(5),
    reader,
    wait: async () => false,
    violations,
    log: (line) => lines.push(line),
    token: `patSIMCLIENT00001.${'0'.repeat(64)}`,
    baseId: 'appSIMCLIENT00001',
    proxyUrl: upstream.url,
    upstreamUrl: upstream.url,
    table: 'Orders',
    dbTable: 'orders',
    seqColumn: 'seq',
    requestTimeoutMs: 500,
  });
  const stop = new AbortController();
  try {
    const running = client.run(stop.signal);
    await pause(2000);
    stop.abort();
    const stoppedAt = Date.now();
    const outcome = await Promise.race([running.then(() => 'stopped'), pause(3000).then(() => 'still running')]);
    assert.is(outcome, 'stopped', 'the actor stops within 3 s of the abort');
    assert.ok(Date.now() - stoppedAt < 3000);
    // Every write was tried and counted as failed (no outcome known), none taken as done.
    assert.ok(upstream.requests() >= 2, `several writes were sent (${upstream.requests()})`);
    assert.is(client.counts.total, 0);
    assert.ok((client.counts.refused.get('proxy.create') ?? 0) >= 2, JSON.stringify([...client.counts.refused]));
    assert.equal(violations, []);
  } finally {
    stop.abort();
    await reader.end();
    await upstream.close();
  }
});

test.run();
