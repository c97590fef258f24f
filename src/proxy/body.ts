import type { Readable } from 'node:stream';
import { Transform, type TransformCallback } from 'node:stream';
import { brotliDecompressSync, gunzipSync, inflateSync } from 'node:zlib';
import { refuse } from './errors.ts';

/** Request bodies larger than this are refused with 413 (Airtable's own limit is a few MB; Stripe's lower). */
export const DEFAULT_MAX_BODY_BYTES = 10 * 1024 * 1024;

export const tooLarge = (limit: number) => refuse('payload_too_large', `the request body exceeds the proxy's limit of ${Math.round(limit / 1024 / 1024)} MiB`);

/** The declared length, when there is one (already validated as digits). */
export function declaredLength(headers: { 'content-length'?: string }): number | undefined {
  return headers['content-length'] === undefined ? undefined : Number(headers['content-length']);
}

/** Reads a whole stream into memory; past `limit` bytes it rejects with `onTooLarge()` and stops reading. */
export function readAll(stream: Readable, limit: number, onTooLarge: () => Error): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const fail = (error: Error) => {
      stream.off('data', onData);
      reject(error);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        fail(onTooLarge());
        stream.resume();
        return;
      }
      chunks.push(chunk);
    };
    stream.on('data', onData);
    stream.once('end', () => resolve(Buffer.concat(chunks, size)));
    stream.once('error', fail);
    // A peer that goes away mid-body ends neither with 'end' nor 'error' on some streams.
    stream.once('aborted', () => fail(new Error('the stream was aborted')));
  });
}

/** Passes bytes through and fails the pipeline once more than `limit` have gone by (streamed bodies). */
export function sizeLimit(limit: number): Transform {
  let size = 0;
  return new Transform({
    transform(chunk: Buffer, _encoding, done: TransformCallback) {
      size += chunk.length;
      if (size > limit) done(tooLarge(limit));
      else done(null, chunk);
    },
  });
}

/** The body as the upstream meant it (for reading only; the client still gets the original bytes). */
export function decoded(body: Buffer, contentEncoding: string | undefined): Buffer {
  switch ((contentEncoding ?? '').trim().toLowerCase()) {
    case '':
    case 'identity':
      return body;
    case 'gzip':
    case 'x-gzip':
      return gunzipSync(body);
    case 'deflate':
      return inflateSync(body);
    case 'br':
      return brotliDecompressSync(body);
    default:
      throw new Error(`unsupported content-encoding ${contentEncoding}`);
  }
}

/** The JSON of a body, or undefined when it is not JSON. */
export function jsonOf(body: Buffer): unknown {
  try {
    return JSON.parse(body.toString('utf8'));
  } catch {
    return undefined;
  }
}
