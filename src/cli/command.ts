import { readFileSync } from 'node:fs';
import type { ParseArgsConfig } from 'node:util';
import { resolveToken, type ClientOptions } from './client.ts';

/** What every command of the CLI is made of, and the helpers they share. */

export type Options = NonNullable<ParseArgsConfig['options']>;

/** A command line's options as parseArgs reads them; an option given `multiple: true` is a list. */
export type Values = Record<string, string | boolean | Array<string | boolean> | undefined>;

export interface Command {
  usage: string;
  summary: string;
  /** More than the summary, for the command's own --help. */
  details?: string;
  options: Options;
  /** Resolves with the exit code when it is not 0 (a watch interrupted by Ctrl-C: 130). */
  run(values: Values, positionals: string[]): Promise<number | undefined>;
}

export const clientOptions: Options = {
  url: { type: 'string' },
  token: { type: 'string' },
};

/** Commands that print an API answer take --json: the answer as the API gave it, for scripts. */
export const jsonOptions: Options = { ...clientOptions, json: { type: 'boolean' } };

export async function client(values: Values): Promise<ClientOptions> {
  const url = (values.url as string | undefined) ?? process.env.TRIBUTARY_URL ?? `http://127.0.0.1:${process.env.TRIBUTARY_API_PORT || 8080}`;
  const { token, source } = await resolveToken(values.token as string | undefined, process.env);
  return { url, token, tokenSource: source };
}

/** A non-negative whole-number option (digits only), or its default; at most `max` when given. */
export function wholeNumber(values: Record<string, unknown>, name: string, fallback: number, max = Number.MAX_SAFE_INTEGER): number {
  const given = values[name];
  if (given === undefined) return fallback;
  const value = typeof given === 'string' && /^\d+$/.test(given) ? Number(given) : Number.NaN;
  if (!(value <= max)) throw new UsageError(`--${name} takes a whole number${max < Number.MAX_SAFE_INTEGER ? ` from 0 to ${max}` : ''}`);
  return value;
}

/** A JSON option (--settings): its value parsed, or a usage error saying so. */
export function jsonArg(name: string, value: string): unknown {
  try {
    return JSON.parse(value);
  } catch (error) {
    throw new UsageError(`--${name} takes JSON, e.g. '{"turbo":true}' (${(error as Error).message})`);
  }
}

/** `-` reads a secret from standard input, so it stays out of the shell history and `ps`. */
export function secretArg(value: string): string {
  return value === '-' ? readFileSync(0, 'utf8').trim() : value;
}

export function booleanArg(name: string, value: string): boolean {
  if (value === 'true') return true;
  if (value === 'false') return false;
  throw new UsageError(`--${name} takes true or false`);
}

/** A command line that names no target or the wrong one: exit 2, like an unknown option. */
export class UsageError extends Error {}

/** A positional argument the command needs (a sync id, a webhook id): a usage error without it. */
export function required(value: string | undefined, message: string): string {
  if (!value) throw new UsageError(message);
  return value;
}

/** The strings of an option given `multiple: true` (none when it is left out). */
export const listOf = (value: Values[string]): string[] => (Array.isArray(value) ? value.map(String) : typeof value === 'string' ? [value] : []);
