import { createCipheriv, createDecipheriv, createHash, hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto';
import { inspect } from 'node:util';
import { TributaryError } from '../errors.ts';

/**
 * A value that must never reach a log line or an API answer by accident:
 * JSON, string conversion and util.inspect all print a placeholder.
 */
export class Secret {
  readonly #value: string;
  constructor(value: string) {
    this.#value = value;
  }
  reveal(): string {
    return this.#value;
  }
  toString(): string {
    return '[secret]';
  }
  toJSON(): string {
    return '[secret]';
  }
  [inspect.custom](): string {
    return '[secret]';
  }
}

const VERSION = 'v1';

/**
 * AES-256-GCM with a random 96-bit nonce per value. The associated data binds each
 * ciphertext to the row and column it belongs to, so a value copied into another
 * row fails to decrypt instead of leaking one tenant's key to another.
 */
export class SecretBox {
  readonly #key: Buffer;

  constructor(key: Buffer) {
    if (key.length !== 32) throw new Error('the secret key must be 32 bytes');
    this.#key = key;
  }

  static fromBase64(text: string): SecretBox {
    const key = Buffer.from(text.trim(), 'base64');
    if (key.length !== 32) {
      throw new Error(`TRIBUTARY_SECRET_KEY must be 32 bytes in base64 (got ${key.length} bytes)`);
    }
    return new SecretBox(key);
  }

  encrypt(plaintext: string, aad: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.#key, iv);
    cipher.setAAD(Buffer.from(aad));
    const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    const tag = cipher.getAuthTag();
    return [VERSION, iv.toString('base64'), tag.toString('base64'), body.toString('base64')].join(':');
  }

  /** A key of its own for one purpose (`attachment links`): HKDF, so no use of it reveals this one. */
  derive(purpose: string): Buffer {
    return Buffer.from(hkdfSync('sha256', this.#key, Buffer.alloc(0), `tributary ${purpose}`, 32));
  }

  decrypt(sealed: string, aad: string): Secret {
    const [version, iv, tag, body] = sealed.split(':');
    if (version !== VERSION || !iv || !tag || body === undefined) {
      throw new TributaryError('internal', 'stored secret has an unknown format', { expose: false });
    }
    try {
      const decipher = createDecipheriv('aes-256-gcm', this.#key, Buffer.from(iv, 'base64'));
      decipher.setAAD(Buffer.from(aad));
      decipher.setAuthTag(Buffer.from(tag, 'base64'));
      const plain = Buffer.concat([decipher.update(Buffer.from(body, 'base64')), decipher.final()]);
      return new Secret(plain.toString('utf8'));
    } catch (cause) {
      throw new TributaryError('internal', 'stored secret could not be decrypted (was TRIBUTARY_SECRET_KEY changed?)', {
        cause,
        expose: false,
      });
    }
  }
}

/** Tokens carry ≥190 bits of entropy, so a plain SHA-256 is a safe one-way store. */
export function hashToken(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}

export function constantTimeEqual(a: string, b: string): boolean {
  const left = createHash('sha256').update(a).digest();
  const right = createHash('sha256').update(b).digest();
  return timingSafeEqual(left, right);
}
