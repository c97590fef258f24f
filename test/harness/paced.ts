import { Pacer } from '../../sim/pacer.ts';

/**
 * A customer's own requests straight to Stripe keep to what the sync leaves them: test mode
 * allows 25 a second and the sync takes 20 (a burst of more is the customer's own 429).
 */
export function pacedWrites(perSecond = 4): <T>(write: () => Promise<T>) => Promise<T> {
  const pacer = new Pacer(perSecond);
  return async (write) => {
    const answered = await pacer.take();
    try {
      return await write();
    } finally {
      answered();
    }
  };
}
