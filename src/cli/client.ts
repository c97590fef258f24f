import { readFile } from 'node:fs/promises';
import path from 'node:path';

export interface ClientOptions {
  url: string;
  token: string;
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly body: unknown,
  ) {
    const error = (body as { error?: { code?: string; message?: string } } | undefined)?.error;
    super(error?.message ? `${status} ${error.code ?? ''}: ${error.message}` : `HTTP ${status}`);
  }
}

/** The management API, as the CLI (and anyone scripting against it) calls it. */
export async function call(options: ClientOptions, method: string, route: string, body?: unknown): Promise<unknown> {
  const response = await fetch(new URL(route, options.url), {
    method,
    headers: {
      authorization: `Bearer ${options.token}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  const parsed: unknown = text ? JSON.parse(text) : undefined;
  if (!response.ok) throw new ApiError(response.status, parsed);
  return parsed;
}

/** Token: --token, then TRIBUTARY_TOKEN, then the operator token file of a local install. */
export async function resolveToken(flag: string | undefined, env: NodeJS.ProcessEnv): Promise<string> {
  if (flag) return flag;
  if (env.TRIBUTARY_TOKEN) return env.TRIBUTARY_TOKEN;
  if (env.TRIBUTARY_ADMIN_TOKEN) return env.TRIBUTARY_ADMIN_TOKEN;
  const file = path.resolve(env.TRIBUTARY_DATA_DIR || '.tributary', 'admin-token');
  try {
    return (await readFile(file, 'utf8')).trim();
  } catch {
    throw new Error(`no token: pass --token, set TRIBUTARY_TOKEN, or run where ${file} exists`);
  }
}
