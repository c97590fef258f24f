import { pino, type Logger } from 'pino';

export type { Logger };

/**
 * Paths that may hold secrets. Redaction is a second line of defence: code never
 * passes keys, tokens or passwords to the logger in the first place.
 */
const redactPaths = [
  'api_key', '*.api_key', 'apiKey', '*.apiKey',
  'password', '*.password', 'token', '*.token', 'api_token', '*.api_token',
  'authorization', '*.authorization', 'headers.authorization', '*.headers.authorization',
  'database_url', '*.database_url', 'url', '*.url', 'secret', '*.secret',
];

export interface LogOptions {
  level?: string;
  /** Destination stream; defaults to stdout. Tests pass a collector to inspect every line. */
  destination?: NodeJS.WritableStream;
}

export function createLogger(options: LogOptions = {}): Logger {
  const level = options.level ?? process.env.TRIBUTARY_LOG_LEVEL ?? 'info';
  return pino(
    { level, base: undefined, redact: { paths: redactPaths, censor: '[redacted]' } },
    options.destination ?? process.stdout,
  );
}
