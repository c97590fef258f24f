import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import type Router from '@koa/router';
import type { Context } from 'koa';
import { notFound } from '../errors.ts';
import type { ApiDocument } from './openapi.ts';
import { z } from './zod.ts';

/** The console's files: hand-written ES modules and CSS, served as they are (no build step). */
export const CONSOLE_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'console');

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
};

/** Only this origin's scripts, styles and API; nothing inline, no frames. */
const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "form-action 'self'",
  "base-uri 'none'",
  "frame-ancestors 'none'",
].join('; ');

interface Asset {
  type: string;
  body: Buffer;
  gzip: Buffer;
  etag: string;
}

function filesUnder(dir: string, prefix = ''): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? filesUnder(path.join(dir, entry.name), `${prefix}${entry.name}/`) : [`${prefix}${entry.name}`],
  );
}

/** Every console file, read and compressed once. index.html gets a modulepreload link per module (no request waterfall). */
export function loadConsoleAssets(dir = CONSOLE_DIR): Map<string, Asset> {
  const assets = new Map<string, Asset>();
  const names = filesUnder(dir).filter((name) => TYPES[path.extname(name)] !== undefined);
  const modules = names.filter((name) => name.endsWith('.js')).sort();
  for (const name of names) {
    let body = readFileSync(path.join(dir, name));
    if (name === 'index.html') {
      const preload = modules.map((m) => `<link rel="modulepreload" href="/console/${m}">`).join('\n    ');
      body = Buffer.from(body.toString('utf8').replace('<!-- modulepreload -->', preload));
    }
    const etag = `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"`;
    assets.set(name, { type: TYPES[path.extname(name)]!, body, gzip: gzipSync(body, { level: 9 }), etag });
  }
  return assets;
}

function send(ctx: Context, asset: Asset): void {
  ctx.set('ETag', asset.etag);
  // Revalidated every time (a 304 costs little), so a new version is never stuck in a cache.
  ctx.set('Cache-Control', 'no-cache');
  ctx.set('Vary', 'Accept-Encoding');
  ctx.set('X-Content-Type-Options', 'nosniff');
  ctx.set('Referrer-Policy', 'no-referrer');
  if (asset.type.startsWith('text/html')) {
    ctx.set('Content-Security-Policy', CONTENT_SECURITY_POLICY);
    ctx.set('X-Frame-Options', 'DENY');
  }
  ctx.type = asset.type;
  if (ctx.get('if-none-match') === asset.etag) {
    ctx.status = 304;
    return;
  }
  if (ctx.acceptsEncodings('gzip', 'identity') === 'gzip') {
    ctx.set('Content-Encoding', 'gzip');
    ctx.body = asset.gzip;
  } else {
    ctx.body = asset.body;
  }
}

/** `{base_url}/` is the console's page; its modules and styles are under `/console/`. */
export function consoleStaticRoutes(router: Router, doc: ApiDocument, assets = loadConsoleAssets()): void {
  const tag = 'console (internal)';
  const notModified = { description: 'Not modified: the `If-None-Match` ETag is current' };
  doc.route({
    method: 'get',
    path: '/',
    operationId: 'consolePage',
    tag,
    summary: "The console's page",
    access: 'public',
    answers: { 200: { description: 'The page', contentType: TYPES['.html'], schema: z.string() }, 304: notModified },
  });
  router.get('/', (ctx) => send(ctx, assets.get('index.html')!));
  doc.route({
    method: 'get',
    path: '/console/{*file}',
    operationId: 'consoleFile',
    tag,
    summary: "One of the console's modules, styles or images",
    access: 'public',
    params: z.object({ file: z.string().describe('A path below /console/; it may hold slashes') }),
    answers: { 200: { description: 'The file', contentType: [...new Set(Object.values(TYPES))], schema: z.string() }, 304: notModified },
    errors: { 404: 'No such file' },
  });
  // Registered after the session routes, which share the /console/ prefix.
  router.get('/console/{*file}', (ctx) => {
    const asset = ctx.params.file === 'index.html' ? undefined : assets.get(ctx.params.file ?? '');
    if (!asset) throw notFound(`console file ${ctx.params.file}`);
    send(ctx, asset);
  });
}
