/** Making sure no broker JVM or temp dir outlives the test process, however it ends. */
import { spawn, type ChildProcess } from 'node:child_process';
import net from 'node:net';

/** What the exit hooks need from a broker: a synchronous kill that also removes its temp dir. */
interface KillableBroker {
  killNow(): void;
}

/** Every JVM this process started, so the exit hook can kill what tests left running. */
export const liveBrokers = new Set<KillableBroker>();

/**
 * 'exit' handlers do not run when the test process is SIGKILLed (test/run.ts
 * does that on its per-file timeout). This sh process reads a pipe from us;
 * when we die, however, the pipe closes, `read` returns and it kills the JVM
 * and removes its temp dir. The guard itself is killed when the JVM exits.
 */
export function spawnOrphanGuard(jvmPid: number, brokerDir: string): ChildProcess {
  const script = 'read line; kill -9 "$1" 2>/dev/null; sleep 1; rm -rf "$2"';
  const guard = spawn('sh', ['-c', script, 'kafka-orphan-guard', String(jvmPid), brokerDir], { stdio: ['pipe', 'ignore', 'ignore'] });
  guard.on('error', () => {}); // best effort: without sh we only lose the SIGKILL protection
  guard.unref();
  if (guard.stdin instanceof net.Socket) guard.stdin.unref();
  return guard;
}

let exitHooksInstalled = false;

/**
 * The 'exit' event covers normal ends of the test process (including uvu
 * finishing). Fatal signals skip 'exit', so they get their own handler that
 * kills the JVMs and then re-raises the signal for the default behaviour.
 * SIGKILL cannot be caught; spawnOrphanGuard covers that case.
 */
export function installExitHooks(): void {
  if (exitHooksInstalled) return;
  exitHooksInstalled = true;
  const killAll = () => {
    for (const broker of liveBrokers) broker.killNow();
    liveBrokers.clear();
  };
  process.on('exit', killAll);
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    const onSignal = () => {
      killAll();
      process.removeListener(signal, onSignal);
      if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
    };
    process.on(signal, onSignal);
  }
}
