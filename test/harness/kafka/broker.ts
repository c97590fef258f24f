/** Public entry points: a fresh broker per caller, or one shared per test process. */
import fs from 'node:fs/promises';
import { createLayout, formatStorage, log4jProperties, serverProperties } from './config.ts';
import { freePorts } from './helpers.ts';
import { kafkaLibs } from './jars.ts';
import { BrokerStartError, LocalKafka } from './process.ts';
import type { KafkaBroker, StartKafkaOptions } from './types.ts';

const START_ATTEMPTS = 3;

/** Starts a fresh broker with its own ports and temp dir. Call stop() when done. */
export function startKafka(opts: StartKafkaOptions = {}): Promise<KafkaBroker> {
  return startLocalKafka(opts);
}

async function startLocalKafka(opts: StartKafkaOptions): Promise<LocalKafka> {
  const log = opts.log ?? (() => {});
  // Maven is slow and silent under -q; without a logger, say why the first run stalls.
  const libs = await kafkaLibs(opts.log ?? ((line) => process.stderr.write(`[kafka harness] ${line}\n`)));
  for (let attempt = 1; ; attempt++) {
    const layout = await createLayout();
    if (opts.front) {
      const [port] = await freePorts(1);
      layout.fronted = { port: port!, advertised: await opts.front(port!) };
    }
    await fs.writeFile(layout.propertiesFile, serverProperties(layout));
    await fs.writeFile(layout.log4jFile, log4jProperties(layout, opts.log !== undefined));
    const broker = new LocalKafka(libs, layout, log);
    try {
      await formatStorage(libs, layout);
      await broker.launch();
      return broker;
    } catch (err) {
      await broker.stop();
      // Free ports are found by binding port 0 and closing; another process can grab one before the JVM binds it.
      const portRace = err instanceof BrokerStartError && /BindException|Address already in use/.test(err.message);
      if (!portRace || attempt >= START_ATTEMPTS) throw err;
      log(`port taken before Kafka could bind it; retrying with new ports (attempt ${attempt + 1})`);
    }
  }
}

let shared: Promise<LocalKafka> | undefined;

/**
 * One broker per test process, started on first call and reused by every
 * suite. Don't stop() it in a suite: it is killed when the process exits.
 * A failed start is cached too, so later suites fail fast with the same error.
 */
export async function sharedKafka(): Promise<KafkaBroker> {
  const current = shared ? await shared : undefined;
  if (current && !current.isStopped) return current;
  const log = process.env.TRIBUTARY_KAFKA_LOG ? (line: string) => process.stderr.write(`[kafka] ${line}\n`) : undefined;
  shared = startLocalKafka(log ? { log } : {});
  return shared;
}
