import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** One note of the test upstream. */
export type Note = {
  id: string;
  text: string;
  updated_at: string;
};

/**
 * A small JSON-over-HTTP upstream for the third kind: notes listed, created and changed with
 * a bearer key. `GET /v1/me` names the key's account; a wrong key is a 401.
 */
export class NotesUpstream {
  readonly notes = new Map<string, Note>();
  private server: http.Server | undefined;
  url = '';

  constructor(private readonly key: string) {}

  async start(): Promise<void> {
    this.server = http.createServer((req, res) => {
      let body = '';
      req.on('data', (chunk: Buffer) => (body += chunk.toString()));
      req.on('end', () => {
        const [status, answer] = this.answer(req, body);
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(answer));
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => this.server?.close(() => resolve()) ?? resolve());
  }

  /** A change made straight upstream, as another client would. */
  write(id: string | undefined, text: string): Note {
    const note = { id: id ?? `note_${randomUUID().slice(0, 8)}`, text, updated_at: new Date().toISOString() };
    this.notes.set(note.id, note);
    return note;
  }

  private answer(req: http.IncomingMessage, body: string): [number, unknown] {
    if (req.headers.authorization !== `Bearer ${this.key}`) return [401, { error: 'bad key' }];
    const path = (req.url ?? '').split('?')[0]!;
    if (req.method === 'GET' && path === '/v1/me') return [200, { account: 'notes-account' }];
    if (req.method === 'GET' && path === '/v1/notes') return [200, { data: [...this.notes.values()] }];
    const text = (JSON.parse(body || '{}') as { text?: unknown }).text;
    if (typeof text !== 'string') return [400, { error: 'text is required' }];
    if (req.method === 'POST' && path === '/v1/notes') return [200, this.write(undefined, text)];
    const id = /^\/v1\/notes\/([\w-]+)$/.exec(path)?.[1];
    if (req.method === 'PATCH' && id && this.notes.has(id)) return [200, this.write(id, text)];
    return [404, { error: 'not found' }];
  }
}
