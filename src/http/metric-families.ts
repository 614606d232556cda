/**
 * Counters and histograms for the paths every request and every batch takes, counted in plain
 * numbers per series. prom-client's own metrics validate and hash a labels object on every inc and
 * observe, even through a child bound to its labels; here a series is bound to its label values
 * once, and the registry reads the counts when scraped. The families have the shape prom-client's
 * registry reads (name, help, type, get), so /metrics writes them like its own.
 */
import type { Metric, Registry } from 'prom-client';

type Labels = Record<string, string | number>;
/** One line of the exposition: what prom-client's registry reads from a metric's get(). */
interface Value {
  metricName: string;
  labels: Labels;
  value: number;
}

abstract class Family<Series> {
  readonly aggregator = 'sum';
  private readonly series = new Map<string, { labels: Labels; series: Series }>();

  protected constructor(
    readonly name: string,
    readonly help: string,
    readonly type: 'counter' | 'histogram',
    private readonly labelNames: readonly string[],
    registry: Registry,
  ) {
    registry.registerMetric(this as unknown as Metric);
  }

  /** The series of these label values, made on first use. Hot paths keep the series it returns. */
  labels(labels: Labels): Series {
    for (const name of Object.keys(labels)) {
      if (!this.labelNames.includes(name)) throw new Error(`${this.name} has no label ${name}`);
    }
    const key = this.labelNames.map((name) => labels[name] ?? '').join('\u0000');
    let entry = this.series.get(key);
    if (!entry) this.series.set(key, (entry = { labels: { ...labels }, series: this.create() }));
    return entry.series;
  }

  async get(): Promise<{ name: string; help: string; type: string; aggregator: string; values: Value[] }> {
    const values: Value[] = [];
    for (const { labels, series } of this.series.values()) this.write(values, labels, series);
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }

  /** Every series starts again from zero (prom-client's Registry.resetMetrics); series held stay bound. */
  reset(): void {
    for (const { series } of this.series.values()) this.zero(series);
  }

  protected abstract create(): Series;
  protected abstract zero(series: Series): void;
  protected abstract write(values: Value[], labels: Labels, series: Series): void;
}

export class CounterSeries {
  value = 0;
  inc(by = 1): void {
    this.value += by;
  }
}

export class CounterFamily extends Family<CounterSeries> {
  constructor(config: { name: string; help: string; labelNames: readonly string[]; registry: Registry }) {
    super(config.name, config.help, 'counter', config.labelNames, config.registry);
  }

  protected create(): CounterSeries {
    return new CounterSeries();
  }

  protected zero(series: CounterSeries): void {
    series.value = 0;
  }

  protected write(values: Value[], labels: Labels, series: CounterSeries): void {
    values.push({ metricName: this.name, labels, value: series.value });
  }
}

export class HistogramSeries {
  /** counts[i]: observations in (upper bound i-1, upper bound i]; the last one past every bound. */
  readonly counts: Float64Array;
  sum = 0;
  count = 0;

  constructor(private readonly upperBounds: readonly number[]) {
    this.counts = new Float64Array(upperBounds.length + 1);
  }

  observe(value: number): void {
    const bounds = this.upperBounds;
    let i = 0;
    while (i < bounds.length && value > bounds[i]!) i++;
    this.counts[i]!++;
    this.sum += value;
    this.count++;
  }
}

export class HistogramFamily extends Family<HistogramSeries> {
  private readonly upperBounds: readonly number[];

  constructor(config: {
    name: string;
    help: string;
    labelNames: readonly string[];
    buckets: readonly number[];
    registry: Registry;
  }) {
    super(config.name, config.help, 'histogram', config.labelNames, config.registry);
    this.upperBounds = [...config.buckets].sort((a, b) => a - b);
  }

  protected create(): HistogramSeries {
    return new HistogramSeries(this.upperBounds);
  }

  protected zero(series: HistogramSeries): void {
    series.counts.fill(0);
    series.sum = 0;
    series.count = 0;
  }

  protected write(values: Value[], labels: Labels, series: HistogramSeries): void {
    const bucket = `${this.name}_bucket`;
    let cumulative = 0;
    this.upperBounds.forEach((bound, i) => {
      cumulative += series.counts[i]!;
      values.push({ metricName: bucket, labels: { ...labels, le: bound }, value: cumulative });
    });
    values.push({ metricName: bucket, labels: { ...labels, le: '+Inf' }, value: series.count });
    values.push({ metricName: `${this.name}_sum`, labels, value: series.sum });
    values.push({ metricName: `${this.name}_count`, labels, value: series.count });
  }
}
