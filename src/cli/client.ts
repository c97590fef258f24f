import { readFile } from 'node:fs/promises';
import path from 'node:path';

export interface ClientOptions {
  url: string;
  token: string;
  /** Where the token came from (`--token`, `$TRIBUTARY_TOKEN`, a file's path): a refusal names it, never the token. */
  tokenSource?: string;
  /** Ends a request in flight (Ctrl-C during `syncs watch`). */
  signal?: AbortSignal;
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly body: unknown,
    tokenSource?: string,
  ) {
    const error = (body as { error?: { code?: string; message?: string } } | undefined)?.error;
    const prefix = `${status} ${error?.code ?? ''}`;
    // A refused token is most often the wrong one picked up from the environment or a file.
    if (status === 401 && tokenSource) super(`${prefix}: the token from ${tokenSource} was refused (${error?.message ?? 'no reason given'})`);
    // An account token where the operator's is needed: typically $TRIBUTARY_TOKEN set earlier.
    else if (status === 403 && tokenSource) super(`${prefix}: ${error?.message ?? 'not allowed'} (the token used is the one from ${tokenSource})`);
    else super(error?.message ? `${prefix}: ${error.message}` : `HTTP ${status}`);
  }
}

/** The management API, as the CLI (and anyone scripting against it) calls it. */
export async function call(options: ClientOptions, method: string, route: string, body?: unknown): Promise<unknown> {
  const url = new URL(route, options.url);
  const response = await fetch(url, {
    method,
    headers: {
      authorization: `Bearer ${options.token}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: options.signal,
  }).catch((error: unknown) => {
    // fetch says only "fetch failed"; the cause (ECONNREFUSED, ENOTFOUND) is what a user can act on.
    const cause = (error as { cause?: { code?: string; message?: string } }).cause;
    if (options.signal?.aborted || !cause) throw error;
    throw new Error(`cannot reach ${url.origin} (${cause.code ?? cause.message}): is the service running, and is --url or $TRIBUTARY_URL right?`);
  });
  const text = await response.text();
  const parsed: unknown = text ? JSON.parse(text) : undefined;
  if (!response.ok) throw new ApiError(response.status, parsed, options.tokenSource);
  return parsed;
}

/** Token: --token, then TRIBUTARY_TOKEN, then TRIBUTARY_ADMIN_TOKEN, then the operator token file of a local install. */
export async function resolveToken(flag: string | undefined, env: NodeJS.ProcessEnv): Promise<{ token: string; source: string }> {
  if (flag) return { token: flag, source: '--token' };
  if (env.TRIBUTARY_TOKEN) return { token: env.TRIBUTARY_TOKEN, source: '$TRIBUTARY_TOKEN' };
  if (env.TRIBUTARY_ADMIN_TOKEN) return { token: env.TRIBUTARY_ADMIN_TOKEN, source: '$TRIBUTARY_ADMIN_TOKEN' };
  const file = path.resolve(env.TRIBUTARY_DATA_DIR || '.tributary', 'admin-token');
  try {
    return { token: (await readFile(file, 'utf8')).trim(), source: file };
  } catch {
    throw new Error(`no token: pass --token, set TRIBUTARY_TOKEN, or run where ${file} exists`);
  }
}
