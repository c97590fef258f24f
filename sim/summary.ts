import type { SimulationReport } from './run.ts';

function table(title: string, rows: Array<[string, string]>): string {
  if (rows.length === 0) return `${title}: none\n`;
  const width = Math.max(title.length, ...rows.map(([a]) => a.length));
  return `${title.padEnd(width)}\n${rows.map(([a, b]) => `  ${a.padEnd(width)}  ${b}`).join('\n')}\n`;
}

/** The run's summary as text tables: operations, events, faults, checks, violations. */
export function summarize(report: SimulationReport): string {
  const ops = [...report.operations].sort(([a], [b]) => a.localeCompare(b));
  const totalDone = ops.reduce((n, [, v]) => n + v.done, 0);
  const faults = new Map<string, number>();
  for (const f of report.faults) faults.set(f.name, (faults.get(f.name) ?? 0) + 1);
  return [
    `simulation: seed ${report.seed}, ${report.minutes} min of traffic\n`,
    table(
      `operations (${totalDone} done)`,
      ops.map(([k, v]) => [k, `${v.done} done${v.refused ? `, ${v.refused} refused or failed` : ''}`]),
    ),
    table(
      'events',
      [...report.events].map(([k, n]) => [k, String(n)]),
    ),
    table(
      `faults (${report.faults.length})`,
      [...faults].map(([k, n]) => [k, `${n}×`]),
    ),
    table(
      'checks',
      [...report.checks].map(([k, n]) => [k, String(n)]),
    ),
    table(
      'requests through the balancers',
      [...report.requests].map(([k, n]) => [k, String(n)]),
    ),
    `liveness: every sync caught up ${(report.convergence.ms / 1000).toFixed(0)} s after the last fault was undone (bound: ${report.convergence.boundMs / 1000} s, the quiet phase)\n`,
    `memory (RSS, the largest process): first ${Math.round(report.memoryKb.first / 1024)} MiB, peak ${Math.round(report.memoryKb.peak / 1024)} MiB, last ${Math.round(report.memoryKb.last / 1024)} MiB\n`,
    report.upstreamsLoopDelayMs
      ? `upstreams' event-loop delay: p99 ${report.upstreamsLoopDelayMs.p99.toFixed(0)} ms, max ${report.upstreamsLoopDelayMs.max.toFixed(0)} ms\n`
      : '',
    report.violations.length === 0
      ? 'violations: none\n'
      : table(
          `violations (${report.violations.length}; reproduce with --seed ${report.seed})`,
          report.violations.map((v) => [v.check, v.detail]),
        ),
  ].join('\n');
}
