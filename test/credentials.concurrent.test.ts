/**
 * A client's first requests with a credential often come at once (a pool of connections
 * opening). They are one check, not one failed-check allowance each: a right credential is
 * never refused as "too many failed credential checks" when none failed, however slow the
 * check. Concurrent wrong guesses still spend an allowance each. A loaded machine found this:
 * 15 requests at once with a new token, a slow lookup, and the address's 10 allowances gone.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { credentialFingerprint, FailedCredentials } from '../src/credentials/throttle.ts';
import { TributaryError } from '../src/errors.ts';
import { fileLogger } from './harness/test-log.ts';

const attempt = (secret: string) => ({ via: 'management API' as const, source: '203.0.113.7', fingerprint: credentialFingerprint(secret) });
const slowly = <T>(value: () => T) =>
  new Promise<T>((resolve, reject) =>
    setTimeout(() => {
      try {
        resolve(value());
      } catch (error) {
        reject(error);
      }
    }, 40),
  );

test('twenty checks at once of a right credential all pass, past an allowance of three', async () => {
  const throttle = new FailedCredentials({ logger: fileLogger(), limits: { perSource: 3 } });
  let verified = 0;
  const answers = await Promise.allSettled(Array.from({ length: 20 }, () => throttle.check(attempt('right'), () => slowly(() => ++verified))));
  assert.equal(
    answers.filter((a) => a.status === 'rejected').map((a) => String((a as PromiseRejectedResult).reason)),
    [],
  );
  assert.is(verified, 20, 'each request is still verified');
});

test('twenty wrong guesses at once: three are checked, the rest refused before their check', async () => {
  const throttle = new FailedCredentials({ logger: fileLogger(), limits: { perSource: 3 } });
  let verified = 0;
  const wrong = () =>
    slowly(() => {
      verified++;
      throw new TributaryError('unauthorized', 'wrong token');
    });
  const answers = await Promise.allSettled(Array.from({ length: 20 }, () => throttle.check(attempt('wrong'), wrong)));
  const reasons = answers.map((a) => ((a as PromiseRejectedResult).reason as TributaryError).code);
  assert.is(reasons.filter((r) => r === 'unauthorized').length, 3);
  assert.is(reasons.filter((r) => r === 'too_many_requests').length, 17);
  assert.is(verified, 3);
  // Another address is not held back by this one's guesses.
  const right = await throttle.check({ ...attempt('right'), source: '198.51.100.9' }, () => slowly(() => 'ok'));
  assert.is(right, 'ok');
});

test.run();
