/**
 * The Node flags the service runs with, wherever it is started: the CLI's shebang, `npm start`
 * and the Docker image carry them literally (test/start.test.ts keeps the four in step), and
 * the simulation and the benchmarks start the service with them.
 *
 * Node 24's V8 lets the young generation grow to 128 MB (64 MB semi-spaces) where Node 20's
 * stopped at 32 MB. A sync allocates short-lived rows at a high rate, so the young generation
 * did grow that far: syncing a base of 1M records peaked at 326–370 MB resident, over the
 * 300 MB budget, against 219 MB with 8 MB semi-spaces and the same throughput
 * (bench/airtable-memory.ts). 16 MB is Node 20's ceiling.
 *
 * --expose-gc lets the process give a burst's memory back once it is over (heap-trim.ts).
 */
export const SERVICE_NODE_FLAGS = ['--max-semi-space-size=16', '--expose-gc'] as const;
