import http from 'node:http';

/** A process behind a balancer: its name (for the report) and the port of the role balanced. */
export interface Backend {
  name: string;
  port: number;
}

/**
 * An HTTP load balancer in front of the processes of one role, as a deployment puts one there:
 * each request goes to the next process in turn (so a client's create and its update may
 * reach two processes), and one that refuses the connection (killed, restarting) is passed
 * over for the next. A request in flight when its process dies is cut, as a real balancer's
 * would be: the client sees the error.
 */
export class Balancer {
  /** Requests handed to each backend, by name; and upstream notifications (/hooks/…) by answer, as `hooks <status>`. */
  readonly requests = new Map<string, number>();
  private next = 0;
  /** A connection a request: none left idle to a process that a fault may kill meanwhile. */
  private readonly agent = new http.Agent({ keepAlive: false });

  private constructor(
    private readonly server: http.Server,
    private readonly backends: Backend[],
    readonly port: number,
  ) {}

  /** port: a fixed one (known before the processes start: the service's public URL), else any free one. */
  static async start(backends: Backend[], port = 0): Promise<Balancer> {
    let balancer: Balancer | undefined;
    const server = http.createServer((req, res) => balancer!.accept(req, res));
    // Long polls and the wait endpoint hold a request for up to a minute: no timeout here.
    server.requestTimeout = 0;
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    balancer = new Balancer(server, backends, (server.address() as { port: number }).port);
    return balancer;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** The body is read whole first, so that a request a process refused can go to the next one. */
  private accept(req: http.IncomingMessage, res: http.ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('error', () => res.destroy());
    req.on('end', () => this.forward(req, Buffer.concat(chunks), res, this.next++, 0));
  }

  private forward(req: http.IncomingMessage, body: Buffer, res: http.ServerResponse, first: number, tried: number): void {
    if (tried >= this.backends.length) {
      res.writeHead(503, { 'content-type': 'text/plain' }).end('no backend accepted the connection');
      return;
    }
    const backend = this.backends[(first + tried) % this.backends.length]!;
    const headers = { ...endToEnd(req.rawHeaders), 'content-length': String(body.length) };
    const upstream = http.request({ host: '127.0.0.1', port: backend.port, method: req.method, path: req.url, headers, agent: this.agent });
    let answered = false;
    upstream.on('response', (answer) => {
      answered = true;
      this.requests.set(backend.name, (this.requests.get(backend.name) ?? 0) + 1);
      if (req.url?.startsWith('/hooks/')) this.requests.set(`hooks ${answer.statusCode}`, (this.requests.get(`hooks ${answer.statusCode}`) ?? 0) + 1);
      res.writeHead(answer.statusCode ?? 502, endToEnd(answer.rawHeaders));
      answer.pipe(res);
      answer.on('error', () => res.destroy());
      // The client gave up: so does the request to the process.
      res.on('close', () => answer.destroy());
    });
    upstream.on('error', (error: NodeJS.ErrnoException) => {
      if (!answered && error.code === 'ECONNREFUSED') this.forward(req, body, res, first, tried + 1);
      else res.destroy();
    });
    upstream.end(body);
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    this.agent.destroy();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

/** Headers a proxy passes on: all but the hop-by-hop ones, which each connection has its own of. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'content-length', 'upgrade', 'proxy-connection', 'te', 'trailer']);

function endToEnd(raw: string[]): Record<string, string | string[]> {
  const headers: Record<string, string | string[]> = {};
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    if (HOP_BY_HOP.has(name)) continue;
    const prior = headers[name];
    headers[name] = prior === undefined ? raw[i + 1]! : [...(Array.isArray(prior) ? prior : [prior]), raw[i + 1]!];
  }
  return headers;
}
