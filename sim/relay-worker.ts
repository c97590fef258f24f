import { parentPort } from 'node:worker_threads';
import { TcpRelay } from './tcp-relay.ts';

/** Messages to the relay thread (sim/relay-thread.ts), each answered with its `id`. */
export type RelayCommand =
  | { id: number; op: 'start'; host: string; port: number }
  | { id: number; op: 'hang' | 'heal' | 'fast' | 'close'; relay: number }
  | { id: number; op: 'slow'; relay: number; latencyMs: number; jitterMs: number };

const relays = new Map<number, TcpRelay>();
let next = 0;

parentPort!.on('message', async (command: RelayCommand) => {
  try {
    if (command.op === 'start') {
      const relay = await TcpRelay.start({ host: command.host, port: command.port });
      relays.set(++next, relay);
      parentPort!.postMessage({ id: command.id, relay: next, port: relay.port });
      return;
    }
    const relay = relays.get(command.relay)!;
    if (command.op === 'slow') relay.slow(command.latencyMs, command.jitterMs);
    else if (command.op === 'close') {
      await relay.close();
      relays.delete(command.relay);
    } else relay[command.op]();
    parentPort!.postMessage({ id: command.id });
  } catch (error) {
    parentPort!.postMessage({ id: command.id, error: (error as Error).message });
  }
});
