/**
 * Workers: the latest snapshot of each worker seen in the last ten minutes, silent ones marked stale, and the
 * workers that stopped cleanly in that time marked stopped.
 */
import type { JSX } from 'preact';
import type { WorkerRow } from '../../../contract.js';
import { ago, duration } from '../format.js';
import { useApi } from '../hooks.js';

export function WorkersPage(): JSX.Element {
  const { data, error } = useApi<WorkerRow[]>('workers');
  if (error) return <p class="error">{error}</p>;
  if (!data) return <p class="muted">loading…</p>;
  return (
    <section>
      <h1>Workers</h1>
      <table data-testid="workers">
        <thead>
          <tr>
            <th>worker</th>
            <th>host</th>
            <th>state</th>
            <th>last snapshot</th>
            <th>up</th>
            <th class="num">running</th>
            <th class="num">claimed</th>
            <th class="num">processes</th>
            <th class="num">CPU %</th>
            <th class="num">memory MB</th>
            <th>queues (max concurrency)</th>
            <th class="num">claim cap</th>
            <th class="num">cluster cap</th>
          </tr>
        </thead>
        <tbody>
          {data.map((w) => (
            <tr
              key={w.worker_id}
              class={w.stale || w.stopped_at ? 'stale' : ''}
              data-worker={w.worker_id}
              data-state={w.stopped_at ? 'stopped' : w.stale ? 'stale' : 'live'}
            >
              <td class="mono">{w.worker_id}</td>
              <td>
                {w.hostname ?? ''}
                {w.pid ? `:${w.pid}` : ''}
              </td>
              <td data-testid="worker-state">
                {w.stopped_at ? (
                  <span class="tag" title={`stopped cleanly at ${w.stopped_at}`}>
                    stopped
                  </span>
                ) : w.stale ? (
                  <span class="tag bad">stale</span>
                ) : (
                  <span class="tag good">live</span>
                )}
              </td>
              <td>
                {w.stopped_at ? 'stopped ' : ''}
                {duration(w.age_ms)} ago
              </td>
              <td>
                {w.worker_started_at && !w.stopped_at ? ago(w.worker_started_at).replace(' ago', '') : ''}
              </td>
              <td class="num">{w.tasks_running ?? ''}</td>
              <td class="num">{w.tasks_claimed ?? ''}</td>
              <td class="num">{w.processes ?? ''}</td>
              <td class="num">{w.cpu_percent === null ? '' : w.cpu_percent.toFixed(1)}</td>
              <td class="num">{w.memory_usage_mb === null ? '' : Math.round(w.memory_usage_mb)}</td>
              <td>
                {(w.queues ?? [])
                  .map((q) => {
                    const cap = w.queue_max_concurrency?.[q];
                    return cap ? `${q} (${cap})` : q;
                  })
                  .join(', ')}
              </td>
              <td class="num">{w.max_claim_per_worker ?? ''}</td>
              <td class="num">{w.cluster_wide_cap ?? '–'}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {data.length === 0 ? (
        <p class="muted">No worker sent a snapshot or stopped in the last ten minutes.</p>
      ) : null}
      <p class="muted">
        Stale: no snapshot within the live window (it may have died). Stopped: it stopped cleanly.
      </p>
    </section>
  );
}
