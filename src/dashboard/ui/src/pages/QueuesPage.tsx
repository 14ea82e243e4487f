/**
 * Queues: depth, in flight, caps and priority as the workers report them, pause and resume; below them the flow
 * control in force (`#/queues?queue=<name>` narrows it to one queue).
 */
import type { JSX } from 'preact';
import type { QueueSummary } from '../../../contract.js';
import { ActionMessage, useAction } from '../components.js';
import { FlowSection } from './FlowSection.js';
import { ago, count } from '../format.js';
import { useApi } from '../hooks.js';
import type { PageProps } from './PageProps.js';

export function QueuesPage(props: PageProps): JSX.Element {
  const { data, error, reload } = useApi<QueueSummary[]>('queues');
  const [action, run] = useAction(reload);
  if (error) return <p class="error">{error}</p>;
  if (!data) return <p class="muted">loading…</p>;
  return (
    <section>
      <h1>Queues</h1>
      <ActionMessage state={action} />
      <table data-testid="queues">
        <thead>
          <tr>
            <th>queue</th>
            <th>state</th>
            <th class="num">pending</th>
            <th class="num">scheduled</th>
            <th class="num">claimed</th>
            <th class="num">running</th>
            <th>oldest pending</th>
            <th class="num">priority</th>
            <th class="num">max concurrency</th>
            <th class="num">workers</th>
            <th class="num">completed (1 h)</th>
            <th class="num">failed (1 h)</th>
            {props.config.actions ? <th /> : null}
          </tr>
        </thead>
        <tbody>
          {data.map((q) => (
            <tr key={q.queue} data-queue={q.queue}>
              <td>
                <a href={`#/tasks?tab=pending&queue=${encodeURIComponent(q.queue)}`}>{q.queue}</a>{' '}
                <a
                  href={`#/queues?queue=${encodeURIComponent(q.queue)}`}
                  title={`flow control of ${q.queue}`}
                >
                  flow
                </a>
              </td>
              <td data-testid="queue-state">{q.paused ? <span class="tag">paused</span> : 'active'}</td>
              <td class="num">{count(q.pending)}</td>
              <td class="num">{count(q.scheduled)}</td>
              <td class="num">{count(q.claimed)}</td>
              <td class="num">{count(q.running)}</td>
              <td>{ago(q.oldestReadyAt)}</td>
              <td class="num">{q.priority ?? '–'}</td>
              <td class="num">{q.maxConcurrency ?? '–'}</td>
              <td class="num">{q.workers}</td>
              <td class="num">{count(q.lastHour.COMPLETED ?? 0)}</td>
              <td class="num">{count(q.lastHour.FAILED ?? 0)}</td>
              {props.config.actions ? (
                <td>
                  <button
                    disabled={action.busy}
                    onClick={() =>
                      run(
                        `queues/${encodeURIComponent(q.queue)}/${q.paused ? 'resume' : 'pause'}`,
                        {},
                        q.paused ? `resumed ${q.queue}` : `paused ${q.queue}`,
                      )
                    }
                  >
                    {q.paused ? 'Resume' : 'Pause'}
                  </button>
                </td>
              ) : null}
            </tr>
          ))}
        </tbody>
      </table>
      {data.length === 0 ? <p class="muted">No queues with tasks yet.</p> : null}
      <p class="muted">
        Finished counts cover the last hour; priority and caps come from the live workers' snapshots.
      </p>
      <FlowSection queue={props.query.get('queue') || null} />
    </section>
  );
}
