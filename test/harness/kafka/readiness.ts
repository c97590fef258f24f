/** When a freshly launched broker counts as ready for tests. */
import { Kafka, logLevel } from 'kafkajs';
import { sleep } from './helpers.ts';

export const READY_TIMEOUT_MS = 90_000;

/** Ready means a kafkajs admin can connect, sees a registered broker, lists topics and finds a group coordinator. */
export async function waitUntilReady(brokers: string[], deadline: number, hasExited: () => boolean): Promise<void> {
  const kafka = new Kafka({
    clientId: 'tributary-test-harness',
    brokers,
    logLevel: logLevel.NOTHING,
    connectionTimeout: 1_000,
    requestTimeout: 5_000,
    retry: { retries: 0 },
  });
  let lastError = 'no attempt made';
  // Polling stops when the JVM dies too; otherwise its timers would keep the test process alive.
  while (Date.now() < deadline && !hasExited()) {
    const admin = kafka.admin();
    try {
      await admin.connect();
      const cluster = await admin.describeCluster();
      if (cluster.brokers.length > 0) {
        await admin.listTopics();
        // Looking up a group coordinator creates __consumer_offsets now, so a test's
        // first consumer doesn't hit (and kafkajs doesn't log) "coordinator not available".
        await admin.describeGroups(['tributary-test-harness-warmup']);
        return;
      }
      lastError = 'no brokers registered yet';
    } catch (err) {
      lastError = err instanceof Error ? err.message : String(err);
    } finally {
      await admin.disconnect().catch(() => {});
    }
    await sleep(250);
  }
  throw new Error(`Kafka not ready after ${READY_TIMEOUT_MS / 1000} s (last error: ${lastError}).`);
}
