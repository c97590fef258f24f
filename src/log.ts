import { pino, type Logger } from 'pino';

export type { Logger };

/**
 * Paths that may hold secrets. Redaction is a second line of defence: code never
 * passes keys, tokens or passwords to the logger in the first place.
 */
const redactPaths = [
  'api_key',
  '*.api_key',
  'apiKey',
  '*.apiKey',
  'password',
  '*.password',
  'token',
  '*.token',
  'api_token',
  '*.api_token',
  'authorization',
  '*.authorization',
  'headers.authorization',
  '*.headers.authorization',
  'database_url',
  '*.database_url',
  'url',
  '*.url',
  'secret',
  '*.secret',
];

/** Properties of an error that are live objects, not facts about it: node-postgres attaches its client (a few KB of state). */
const LIVE_PROPERTIES = ['client'];

/** Pino's error serializer, less the live objects some libraries hang on their errors. */
function errorOf(error: unknown): unknown {
  const serialized = pino.stdSerializers.err(error as Error) as unknown;
  // Anything but an error comes back as it was: the caller's own object, not ours to change.
  if (serialized === error || serialized === null || typeof serialized !== 'object') return serialized;
  for (const key of LIVE_PROPERTIES) delete (serialized as Record<string, unknown>)[key];
  return serialized;
}

export interface LogOptions {
  level?: string;
  /** Destination stream; defaults to stdout. Tests pass a collector to inspect every line. */
  destination?: NodeJS.WritableStream;
}

export function createLogger(options: LogOptions = {}): Logger {
  const level = options.level ?? process.env.TRIBUTARY_LOG_LEVEL ?? 'info';
  return pino(
    { level, base: undefined, redact: { paths: redactPaths, censor: '[redacted]' }, serializers: { err: errorOf } },
    options.destination ?? process.stdout,
  );
}

/**
 * Node's process warnings go into the log as JSON lines, not as bare text on stderr. One is
 * known and harmless: kafkajs 2.2 (the Kafka relay's client; no release fixes it) schedules its
 * request queue's next check with a negative delay, which Node runs after 1 ms as it always has;
 * Node 24 says so at every connection. That one is logged at debug, any other at warn.
 */
export function logProcessWarnings(logger: Logger): void {
  process.removeAllListeners('warning');
  process.on('warning', (warning) => {
    const known = warning.name === 'TimeoutNegativeWarning' && /kafkajs[\\/]src[\\/]network[\\/]requestQueue/.test(warning.stack ?? '');
    if (known) logger.debug({ warning: warning.message }, 'kafkajs set a timer with a negative delay (run after 1 ms)');
    else logger.warn({ err: warning }, `Node warning: ${warning.name}`);
  });
}
