import { closeSync, openSync, writeSync } from 'node:fs';
import { Writable } from 'node:stream';
import { createLogger, type Logger } from '../../src/log.ts';

/**
 * The file's service log: every log line of the services a test file runs (in its own process
 * or as child processes), appended to the file `test/run.ts` names in TEST_SERVICE_LOG. The
 * runner prints the lines around a failure from it, so a failure in CI can be read without a
 * rerun. Written synchronously: a file that crashes or is killed keeps what it logged.
 */
let fd: number | undefined;
let unavailable = false;

function open(): number | undefined {
  if (fd !== undefined || unavailable) return fd;
  const file = process.env.TEST_SERVICE_LOG;
  if (!file) {
    unavailable = true;
    return undefined;
  }
  try {
    fd = openSync(file, 'a');
    process.once('exit', () => closeSync(fd!));
  } catch {
    unavailable = true; // a run without the runner's folder keeps its logs in memory only
  }
  return fd;
}

/** Appends log lines (as they came, JSON or not) to the file's service log; `source` names who wrote them. */
export function teeToTestLog(text: string, source?: string): void {
  const target = open();
  if (target === undefined || text === '') return;
  const body = text.endsWith('\n') ? text : `${text}\n`;
  writeSync(target, source ? body.replace(/^(?=.)/gm, `[${source}] `) : body);
}

/**
 * A logger for parts a test file runs by hand (a decoder, a store, a sync runner) rather than
 * through a whole service: at debug level, into the file's service log and nowhere else, so that
 * a failure shows what those parts did as it does for a service.
 */
export function fileLogger(): Logger {
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      teeToTestLog(chunk.toString('utf8'));
      done();
    },
  });
  return createLogger({ level: process.env.TEST_SERVICE_LOG ? 'debug' : 'silent', destination: sink });
}
