/**
 * The soak's minutes and its verdict on them. A judged series has reached a plateau when, with the minutes split
 * in thirds,
 *
 * - the last third's mean is at most `share` above the middle third's, and
 * - the last third's least-squares slope, carried over the third's length, adds at most `share` of its mean;
 *
 * `share` is 10% for sizes and 25% for latencies (a shared machine's pauses reach the p99), and a difference under
 * `floor` (1 MiB, 5 ms) counts as noise. Fewer than 6 minutes are too few to judge.
 */

/** One table's figures at the end of a minute (sizes, rows) and during it (vacuums, deletes). */
export interface TableMinute {
  /** Table, TOAST and indexes (`pg_total_relation_size`). */
  bytes: number;
  indexBytes: number;
  live: number;
  dead: number;
  autovacuums: number;
  /** VACUUMs other than autovacuum's: horsies' own vacuum check. */
  vacuums: number;
  /** Rows deleted: the retainer (and the cascade from tasks to attempts). */
  deleted: number;
}

/** One line of the JSON-lines file. */
export interface Minute {
  minute: number;
  /** End of the minute (the server's clock). */
  at: string;
  /** Stream tasks sent. */
  sent: number;
  /** Stream tasks completed. */
  completed: number;
  /** Workflow nodes' and scheduled tasks completed. */
  otherCompleted: number;
  workflowsCompleted: number;
  /** Send-to-start of the stream's tasks completed that minute (`started_at - sent_at`). */
  p50Ms: number | null;
  p99Ms: number | null;
  /** Tasks waiting to be claimed at the end of the minute. */
  pending: number;
  tasks: TableMinute;
  attempts: TableMinute;
  /** WAL the server wrote that minute. */
  walBytes: number;
  workersCpuPct: number;
  senderCpuPct: number;
  /** How late the sender's tick was at worst (ms). */
  sendLagMaxMs: number;
}

export interface SeriesVerdict {
  name: string;
  ok: boolean;
  detail: string;
}

export interface Verdict {
  /** False when the run was too short to judge. */
  judged: boolean;
  ok: boolean;
  series: SeriesVerdict[];
  summary: string;
}

interface Judged {
  name: string;
  unit: 'bytes' | 'ms';
  value: (m: Minute) => number | null;
}

export const JUDGED: Judged[] = [
  { name: 'tasks table size', unit: 'bytes', value: (m) => m.tasks.bytes },
  { name: 'tasks index size', unit: 'bytes', value: (m) => m.tasks.indexBytes },
  { name: 'attempts table size', unit: 'bytes', value: (m) => m.attempts.bytes },
  { name: 'attempts index size', unit: 'bytes', value: (m) => m.attempts.indexBytes },
  { name: 'send-to-start p50', unit: 'ms', value: (m) => m.p50Ms },
  { name: 'send-to-start p99', unit: 'ms', value: (m) => m.p99Ms },
];

const RULE = {
  bytes: { share: 0.1, floor: 1_048_576 },
  ms: { share: 0.25, floor: 5 },
};

const mean = (xs: number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;

/** Least-squares slope of ys over 0, 1, 2... (per minute). */
function slope(ys: number[]): number {
  const xm = (ys.length - 1) / 2;
  const ym = mean(ys);
  let num = 0;
  let den = 0;
  ys.forEach((y, x) => {
    num += (x - xm) * (y - ym);
    den += (x - xm) ** 2;
  });
  return den === 0 ? 0 : num / den;
}

function show(v: number, unit: 'bytes' | 'ms'): string {
  return unit === 'bytes' ? `${(v / 1_048_576).toFixed(1)} MiB` : `${v.toFixed(1)} ms`;
}

export function judgePlateau(minutes: Minute[]): Verdict {
  const n = minutes.length;
  if (n < 6) {
    return {
      judged: false,
      ok: false,
      series: [],
      summary: `too short to judge: ${n} minute(s), at least 6 needed`,
    };
  }
  const middle = minutes.slice(Math.floor(n / 3), Math.floor((2 * n) / 3));
  const last = minutes.slice(Math.floor((2 * n) / 3));
  const series = JUDGED.map(({ name, unit, value }): SeriesVerdict => {
    const mid = middle.map(value).filter((v): v is number => v !== null);
    const end = last.map(value).filter((v): v is number => v !== null);
    if (mid.length === 0 || end.length < 2) return { name, ok: false, detail: 'no figures' };
    const { share, floor } = RULE[unit];
    const midMean = mean(mid);
    const endMean = mean(end);
    const drift = slope(end) * end.length;
    const ok = endMean <= midMean * (1 + share) + floor && drift <= endMean * share + floor;
    return {
      name,
      ok,
      detail:
        `middle third ${show(midMean, unit)}, last third ${show(endMean, unit)} ` +
        `(${midMean > 0 ? `${(((endMean - midMean) / midMean) * 100).toFixed(1)}%` : 'n/a'}), ` +
        `slope over the last third ${drift >= 0 ? '+' : ''}${show(drift, unit)}`,
    };
  });
  const grows = series.filter((s) => !s.ok).map((s) => s.name);
  return {
    judged: true,
    ok: grows.length === 0,
    series,
    summary:
      grows.length === 0
        ? `plateau: sizes and latencies flat over the last third (${last.length} of ${n} minutes)`
        : `no plateau: ${grows.join(', ')} still growing`,
  };
}
