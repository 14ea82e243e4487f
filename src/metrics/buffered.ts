/**
 * Counters and histograms whose hot path is a plain addition. prom-client hashes and validates the label set on
 * every `inc()` and `observe()` (about 1 to 3 µs each), which a worker would pay several times per task. Here
 * each labelled series is an object the caller keeps: counting adds to a number, and the sums reach the registry
 * when it is collected (at each scrape). Both kinds serve the ordinary Prometheus text and JSON formats.
 */
import { Counter } from 'prom-client';
import type {
  LabelValues,
  Metric,
  MetricObjectWithValues,
  MetricType,
  MetricValueWithName,
  Registry,
} from 'prom-client';

/** One labelled series of a {@link BufferedCounter}. */
export interface CountSeries {
  inc(by?: number): void;
}

/** A prom-client Counter fed from series that count in plain numbers, folded in when it is collected. */
export class BufferedCounter<L extends string> {
  /** The registered prom-client counter. */
  readonly counter: Counter<L>;
  private readonly series: { labels: LabelValues<L>; pending: number }[] = [];

  constructor(name: string, help: string, labelNames: L[], registry: Registry) {
    const series = this.series;
    this.counter = new Counter<L>({
      name,
      help,
      labelNames,
      registers: [registry],
      collect() {
        for (const s of series) {
          if (s.pending === 0) continue;
          this.inc(s.labels, s.pending);
          s.pending = 0;
        }
      },
    });
  }

  /** A series for `labels`; keep it (each call makes a new one, adding to the same figure). */
  child(labels: LabelValues<L>): CountSeries {
    const s = { labels, pending: 0 };
    this.series.push(s);
    return {
      inc: (by = 1) => {
        s.pending += by;
      },
    };
  }
}

/** One labelled series of a {@link BucketHistogram}. */
export interface ObserveSeries {
  observe(value: number): void;
}

interface HistogramSeries {
  labels: Record<string, string>;
  /** Observations per bucket (not cumulative); the last slot holds those above the highest bound. */
  counts: number[];
  sum: number;
  count: number;
}

/** A histogram with fixed buckets (Prometheus type `histogram`), registered as a metric of its own. */
export class BucketHistogram {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  private readonly series: HistogramSeries[] = [];

  constructor(
    readonly name: string,
    readonly help: string,
    private readonly upperBounds: readonly number[],
    registry: Registry,
  ) {
    registry.registerMetric(this as unknown as Metric);
  }

  /** A series for `labels`; keep it. */
  child(labels: Record<string, string>): ObserveSeries {
    const s: HistogramSeries = {
      labels,
      counts: new Array<number>(this.upperBounds.length + 1).fill(0),
      sum: 0,
      count: 0,
    };
    this.series.push(s);
    const bounds = this.upperBounds;
    return {
      observe: (value) => {
        let i = 0;
        while (i < bounds.length && value > (bounds[i] as number)) i += 1;
        s.counts[i] = (s.counts[i] as number) + 1;
        s.sum += value;
        s.count += 1;
      },
    };
  }

  /** The values as prom-client's registry formats them (cumulative buckets, `+Inf`, sum and count). */
  async get(): Promise<MetricObjectWithValues<MetricValueWithName<string>>> {
    const values: MetricValueWithName<string>[] = [];
    // Series of the same labels (made by several callers) add up.
    const merged = new Map<string, HistogramSeries>();
    for (const s of this.series) {
      const key = JSON.stringify(s.labels);
      const m = merged.get(key);
      if (!m) merged.set(key, { ...s, counts: [...s.counts] });
      else {
        s.counts.forEach((c, i) => (m.counts[i] = (m.counts[i] as number) + c));
        m.sum += s.sum;
        m.count += s.count;
      }
    }
    for (const s of merged.values()) {
      let cumulative = 0;
      this.upperBounds.forEach((le, i) => {
        cumulative += s.counts[i] as number;
        values.push({ labels: { ...s.labels, le }, value: cumulative, metricName: `${this.name}_bucket` });
      });
      values.push({ labels: { ...s.labels, le: '+Inf' }, value: s.count, metricName: `${this.name}_bucket` });
      values.push({ labels: s.labels, value: s.sum, metricName: `${this.name}_sum` });
      values.push({ labels: s.labels, value: s.count, metricName: `${this.name}_count` });
    }
    return {
      name: this.name,
      help: this.help,
      // The typings give MetricType as a numeric enum; prom-client itself uses (and formats) the string.
      type: 'histogram' as unknown as MetricType,
      values,
      aggregator: 'sum',
      collect: () => undefined,
    };
  }

  /** Forgets every observation (prom-client's `registry.resetMetrics()` calls it). */
  reset(): void {
    for (const s of this.series) {
      s.counts.fill(0);
      s.sum = 0;
      s.count = 0;
    }
  }
}
