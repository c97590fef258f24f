import { checkLabelName, checkMetricName, type Family, type Labels, type MetricType, render, type Sample } from './exposition.ts';

/** Latency buckets in seconds, from a local answer to a slow upstream behind a busy quota. */
export const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

/** Values read when scraped (from the control database, say) rather than kept in memory. */
export type Collector = () => Promise<Family[]>;

abstract class Metric {
  constructor(
    readonly name: string,
    readonly help: string,
    readonly labelNames: readonly string[],
  ) {
    checkMetricName(name);
    labelNames.forEach(checkLabelName);
  }

  abstract readonly type: MetricType;
  abstract samples(): Sample[];

  /** The series' key; labels must be exactly the declared ones. */
  protected key(labels: Labels): { key: string; labels: Labels } {
    const names = Object.keys(labels);
    if (names.length !== this.labelNames.length || !this.labelNames.every((n) => n in labels)) {
      throw new Error(`${this.name} takes labels ${this.labelNames.join(', ') || '(none)'}, got ${names.join(', ') || '(none)'}`);
    }
    const ordered = Object.fromEntries(this.labelNames.map((n) => [n, String(labels[n])]));
    return { key: JSON.stringify(this.labelNames.map((n) => ordered[n])), labels: ordered };
  }
}

export class Counter extends Metric {
  readonly type = 'counter';
  private readonly values = new Map<string, { labels: Labels; value: number }>();

  inc(labels: Labels = {}, by = 1): void {
    if (!(by >= 0)) throw new Error(`${this.name}: a counter only goes up`);
    const { key, labels: ordered } = this.key(labels);
    const entry = this.values.get(key) ?? { labels: ordered, value: 0 };
    entry.value += by;
    this.values.set(key, entry);
  }

  samples(): Sample[] {
    return [...this.values.values()].map((e) => ({ name: this.name, labels: e.labels, value: e.value }));
  }
}

export class Gauge extends Metric {
  readonly type = 'gauge';
  private readonly values = new Map<string, { labels: Labels; value: number }>();

  set(labels: Labels, value: number): void {
    const { key, labels: ordered } = this.key(labels);
    this.values.set(key, { labels: ordered, value });
  }

  samples(): Sample[] {
    return [...this.values.values()].map((e) => ({ name: this.name, labels: e.labels, value: e.value }));
  }
}

export class Histogram extends Metric {
  readonly type = 'histogram';
  private readonly values = new Map<string, { labels: Labels; counts: number[]; sum: number; count: number }>();

  constructor(
    name: string,
    help: string,
    labelNames: readonly string[],
    readonly buckets: readonly number[],
  ) {
    super(name, help, labelNames);
    if (labelNames.includes('le')) throw new Error(`${name}: "le" is the histogram's own label`);
    if (buckets.length === 0 || buckets.some((b, i) => i > 0 && b <= buckets[i - 1]!)) throw new Error(`${name}: buckets must increase`);
  }

  observe(labels: Labels, value: number): void {
    const { key, labels: ordered } = this.key(labels);
    const entry = this.values.get(key) ?? { labels: ordered, counts: this.buckets.map(() => 0), sum: 0, count: 0 };
    // Each bucket counts the observations at or below its bound (cumulative, as the format wants).
    this.buckets.forEach((bound, i) => {
      if (value <= bound) entry.counts[i]!++;
    });
    entry.sum += value;
    entry.count++;
    this.values.set(key, entry);
  }

  samples(): Sample[] {
    return [...this.values.values()].flatMap((e) => [
      ...this.buckets.map((bound, i) => ({ name: `${this.name}_bucket`, labels: { ...e.labels, le: String(bound) }, value: e.counts[i]! })),
      { name: `${this.name}_bucket`, labels: { ...e.labels, le: '+Inf' }, value: e.count },
      { name: `${this.name}_sum`, labels: e.labels, value: e.sum },
      { name: `${this.name}_count`, labels: e.labels, value: e.count },
    ]);
  }
}

/** In-process metrics plus collectors read at scrape time; `render()` is the /metrics answer. */
export class MetricsRegistry {
  private readonly metrics = new Map<string, Metric>();
  private readonly collectors: Collector[] = [];

  counter(name: string, help: string, labelNames: readonly string[] = []): Counter {
    return this.add(new Counter(name, help, labelNames));
  }

  gauge(name: string, help: string, labelNames: readonly string[] = []): Gauge {
    return this.add(new Gauge(name, help, labelNames));
  }

  histogram(name: string, help: string, labelNames: readonly string[] = [], buckets: readonly number[] = LATENCY_BUCKETS): Histogram {
    return this.add(new Histogram(name, help, labelNames, buckets));
  }

  collect(collector: Collector): void {
    this.collectors.push(collector);
  }

  async render(): Promise<string> {
    const collected = (await Promise.all(this.collectors.map((c) => c()))).flat();
    const own: Family[] = [...this.metrics.values()].map((m) => ({ name: m.name, help: m.help, type: m.type, samples: m.samples() }));
    const names = new Set(own.map((f) => f.name));
    for (const family of collected) {
      if (names.has(family.name)) throw new Error(`metric ${family.name} is registered twice`);
      names.add(family.name);
    }
    return render([...own, ...collected]);
  }

  private add<M extends Metric>(metric: M): M {
    if (this.metrics.has(metric.name)) throw new Error(`metric ${metric.name} is registered twice`);
    this.metrics.set(metric.name, metric);
    return metric;
  }
}
