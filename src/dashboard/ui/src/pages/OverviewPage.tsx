/** Overview: live counts, the last hour's throughput and failure rate, oldest pending age, workers, leader. */
import type { JSX } from 'preact';
import type { Overview } from '../../../contract.js';
import { Chart } from '../Chart.js';
import { Stat } from '../components.js';
import { ago, count, duration } from '../format.js';
import { useApi } from '../hooks.js';

/** The last hour as one point per minute, zero where nothing finished. */
function minutes(overview: Overview): {
  times: number[];
  completed: number[];
  failed: number[];
  rate: (number | null)[];
} {
  const byMinute = new Map(overview.throughput.map((b) => [Math.floor(Date.parse(b.bucket) / 60_000), b]));
  const now = Math.floor(Date.now() / 60_000);
  const times: number[] = [];
  const completed: number[] = [];
  const failed: number[] = [];
  const rate: (number | null)[] = [];
  for (let m = now - 59; m <= now; m++) {
    const b = byMinute.get(m);
    times.push(m * 60);
    completed.push(b?.completed ?? 0);
    failed.push(b?.failed ?? 0);
    const total = (b?.completed ?? 0) + (b?.failed ?? 0) + (b?.other ?? 0);
    rate.push(total === 0 ? null : Math.round((1000 * ((b?.failed ?? 0) + (b?.other ?? 0))) / total) / 10);
  }
  return { times, completed, failed, rate };
}

export function OverviewPage(): JSX.Element {
  const { data, error } = useApi<Overview>('overview');
  if (error) return <p class="error">{error}</p>;
  if (!data) return <p class="muted">loading…</p>;
  const t = data.totals;
  const series = minutes(data);
  const leader = data.leaders.find((l) => l.name === 'maintenance');
  return (
    <section>
      <h1>Overview</h1>
      <div class="stats">
        <Stat id="pending" label="pending" value={count(t.pending)} />
        <Stat id="scheduled" label="scheduled" value={count(t.scheduled)} />
        <Stat id="claimed" label="claimed" value={count(t.claimed)} />
        <Stat id="running" label="running" value={count(t.running)} />
        <Stat id="completed" label="completed (1 h)" value={count(t.lastHour.COMPLETED ?? 0)} tone="good" />
        <Stat id="failed" label="failed (1 h)" value={count(t.lastHour.FAILED ?? 0)} tone="bad" />
        <Stat
          id="oldest"
          label="oldest pending"
          value={data.oldestReadyAt ? duration(Date.now() - Date.parse(data.oldestReadyAt)) : '–'}
        />
        <Stat
          id="workers"
          label={`workers live${
            data.workers.stale || data.workers.stopped
              ? ` (${[
                  data.workers.stale ? `${data.workers.stale} stale` : '',
                  data.workers.stopped ? `${data.workers.stopped} stopped` : '',
                ]
                  .filter(Boolean)
                  .join(', ')})`
              : ''
          }`}
          value={data.workers.live}
        />
        <Stat
          id="leader"
          label="maintenance leader"
          value={<span class="small">{leader && leader.live ? leader.leader_id : 'none'}</span>}
        />
      </div>
      <div class="charts">
        <Chart
          testid="chart-throughput"
          title="Finished per minute, last hour"
          times={series.times}
          series={[
            { label: 'completed', color: '#2e7d32', values: series.completed },
            { label: 'failed', color: '#c62828', values: series.failed },
          ]}
        />
        <Chart
          testid="chart-failure-rate"
          title="Failure rate, last hour"
          unit="%"
          times={series.times}
          series={[{ label: 'failed, cancelled or expired', color: '#ef6c00', values: series.rate }]}
        />
      </div>
      <h2>By queue</h2>
      <table data-testid="overview-queues">
        <thead>
          <tr>
            <th>queue</th>
            <th class="num">pending</th>
            <th class="num">scheduled</th>
            <th class="num">claimed</th>
            <th class="num">running</th>
            <th class="num">completed (1 h)</th>
            <th class="num">failed (1 h)</th>
            <th class="num">cancelled (1 h)</th>
            <th class="num">expired (1 h)</th>
            <th>oldest pending</th>
          </tr>
        </thead>
        <tbody>
          {data.queues.map((q) => (
            <tr key={q.queue} data-queue={q.queue}>
              <td>
                <a href={`#/tasks?tab=pending&queue=${encodeURIComponent(q.queue)}`}>{q.queue}</a>
                {q.paused ? <span class="tag">paused</span> : null}
              </td>
              <td class="num">{count(q.pending)}</td>
              <td class="num">{count(q.scheduled)}</td>
              <td class="num">{count(q.claimed)}</td>
              <td class="num">{count(q.running)}</td>
              <td class="num">{count(q.lastHour.COMPLETED ?? 0)}</td>
              <td class="num">{count(q.lastHour.FAILED ?? 0)}</td>
              <td class="num">{count(q.lastHour.CANCELLED ?? 0)}</td>
              <td class="num">{count(q.lastHour.EXPIRED ?? 0)}</td>
              <td>{ago(q.oldestReadyAt)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {data.queues.length === 0 ? <p class="muted">No tasks yet.</p> : null}
    </section>
  );
}
