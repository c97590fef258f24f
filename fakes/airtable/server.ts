import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Core } from './core.ts';
import { AirtableApiError, NOT_FOUND_MESSAGE } from './errors.ts';
import { faultBody } from './faults.ts';
import { arrivalLatenessMs } from '../shared/arrival.ts';
import { readBody, requestLine, sendJson } from '../shared/http-io.ts';
import { RequestContext } from './request-context.ts';
import { baseIdOfPath, route } from './router.ts';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function splitPath(pathname: string): string[] | undefined {
  const raw = pathname.split('/').slice(1);
  if (raw.length > 1 && raw[raw.length - 1] === '') raw.pop();
  try {
    return raw.map((seg) => decodeURIComponent(seg));
  } catch {
    return undefined;
  }
}

/** Attachment downloads: the signed url works until the expiry it carries. */
function serveAttachment(core: Core, segments: string[], res: ServerResponse): void {
  const expires = Number(segments[2]);
  if (segments.length !== 4 || !Number.isFinite(expires)) {
    sendJson(res, 404, { error: { type: 'NOT_FOUND', message: NOT_FOUND_MESSAGE } });
    return;
  }
  if (core.world.now() > expires) {
    sendJson(res, 410, { error: { type: 'GONE', message: 'This attachment url has expired' } });
    return;
  }
  const body = Buffer.from(`fake attachment ${segments[1]}\n`);
  res.statusCode = 200;
  res.setHeader('content-type', 'application/octet-stream');
  res.setHeader('content-length', body.length);
  res.end(body);
}

async function handle(core: Core, req: IncomingMessage, res: ServerResponse): Promise<void> {
  // Airtable counts a request when it arrives, not when a busy server gets round to it.
  const arrivedAt = core.world.now() - arrivalLatenessMs(req.headers, core.trustArrivalStamps);
  const { method, url } = requestLine(req);
  const segments = splitPath(url.pathname) ?? ['\u0000'];
  const baseId = baseIdOfPath(segments);
  core.stats.request(baseId);
  const body = await readBody(req);

  const fault = core.faults.take({ method, path: url.pathname, baseId });
  let truncate = false;
  if (fault) {
    switch (fault.kind) {
      case 'hang':
        return; // answered never; close() drops the socket
      case 'status':
        sendJson(res, fault.status as number, fault.body ?? faultBody(fault.status as number));
        return;
      case 'delay':
        await sleep(fault.delayMs ?? 1000);
        break;
      case 'lateAnswer': {
        const end = res.end.bind(res) as (...args: unknown[]) => void;
        res.end = ((...args: unknown[]) => {
          setTimeout(() => end(...args), fault.delayMs ?? 1000);
          return res;
        }) as typeof res.end;
        break;
      }
      case 'truncate':
        truncate = true;
        break;
      case 'resetOffsets':
        core.iterators.clear();
        break;
    }
  }
  if (body === null) {
    sendJson(res, 413, { error: { type: 'REQUEST_TOO_LARGE', message: 'Request body is too large' } }, { close: true });
    return;
  }
  if (segments[0] === 'attachments' && method === 'GET') {
    serveAttachment(core, segments, res);
    return;
  }
  const ctx = new RequestContext(core, method, segments, url.searchParams, req.headers, body, arrivedAt);
  try {
    const answer = route(ctx);
    sendJson(res, answer.status, answer.body, { truncate });
  } catch (e) {
    if (e instanceof AirtableApiError) {
      sendJson(res, e.status, e.body, { truncate });
    } else {
      // A bug in the fake, not an Airtable behaviour: say so loudly but keep serving.
      const message = e instanceof Error ? e.message : String(e);
      sendJson(res, 500, { error: { type: 'SERVER_ERROR', message: `fake airtable bug: ${message}` } });
    }
  }
}

export function createFakeServer(core: Core): Server {
  const server = createServer((req, res) => {
    handle(core, req, res).catch(() => {
      if (!res.headersSent) sendJson(res, 500, { error: { type: 'SERVER_ERROR', message: 'unexpected failure' } });
    });
  });
  server.on('clientError', (_err, socket) => {
    if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\ncontent-type: application/json; charset=utf-8\r\nconnection: close\r\n\r\n');
    else socket.destroy();
  });
  return server;
}
