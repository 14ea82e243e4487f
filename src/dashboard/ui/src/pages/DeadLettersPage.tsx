/**
 * Dead letters: FAILED, CANCELLED and EXPIRED tasks grouped by task, queue and error code; resubmit a group, or
 * everything a filter matches, in bulk.
 */
import type { JSX } from 'preact';
import type { DeadLetterGroup } from '../../../contract.js';
import { ActionMessage, useAction } from '../components.js';
import { ago, count } from '../format.js';
import { useApi } from '../hooks.js';
import type { PageProps } from './PageProps.js';

function tasksLink(g: { task_name: string; queue_name: string; error_code: string | null }): string {
  const q = new URLSearchParams({ tab: 'dead', task: g.task_name, queue: g.queue_name });
  if (g.error_code) q.set('error', g.error_code);
  return `#/tasks?${q.toString()}`;
}

export function DeadLettersPage(props: PageProps): JSX.Element {
  const { data, error, reload } = useApi<DeadLetterGroup[]>('dead-letters');
  const [action, run] = useAction(reload);
  if (error) return <p class="error">{error}</p>;
  if (!data) return <p class="muted">loading…</p>;
  return (
    <section>
      <h1>Dead letters</h1>
      <p class="muted">
        Failed, cancelled (TASK_CANCELLED) and expired (TASK_EXPIRED) tasks by task, queue and error code. A
        resubmit puts them back to PENDING with a fresh retry budget; attempt numbers continue and the history
        is kept.
      </p>
      <ActionMessage state={action} />
      {props.config.actions ? (
        <form
          class="filters"
          data-testid="bulk-resubmit"
          onSubmit={(e) => {
            e.preventDefault();
            const form = e.currentTarget as HTMLFormElement;
            const value = (name: string): string | undefined =>
              (form.elements.namedItem(name) as HTMLInputElement | HTMLSelectElement).value.trim() ||
              undefined;
            run(
              'dead-letters/resubmit',
              {
                status: value('status'),
                taskName: value('taskName'),
                queue: value('queue'),
                errorCode: value('errorCode'),
              },
              'resubmitted',
            );
          }}
        >
          <label>
            status
            <select name="status">
              <option value="FAILED">FAILED</option>
              <option value="CANCELLED">CANCELLED</option>
              <option value="EXPIRED">EXPIRED</option>
            </select>
          </label>
          <label>
            task name <input name="taskName" />
          </label>
          <label>
            queue <input name="queue" />
          </label>
          <label>
            error code <input name="errorCode" />
          </label>
          <button type="submit" disabled={action.busy}>
            Resubmit all matching
          </button>
        </form>
      ) : null}
      <table data-testid="dead-letters">
        <thead>
          <tr>
            <th>task</th>
            <th>queue</th>
            <th>error code</th>
            <th class="num">tasks</th>
            <th>last</th>
            {props.config.actions ? <th /> : null}
          </tr>
        </thead>
        <tbody>
          {data.map((g) => (
            <tr
              key={`${g.task_name}/${g.queue_name}/${g.error_code}`}
              data-group={`${g.task_name}/${g.error_code ?? ''}`}
            >
              <td>
                <a href={tasksLink(g)}>{g.task_name}</a>
              </td>
              <td>{g.queue_name}</td>
              <td>{g.error_code ?? ''}</td>
              <td class="num">{count(g.count)}</td>
              <td>{ago(g.last_failed_at)}</td>
              {props.config.actions ? (
                <td>
                  <button
                    disabled={action.busy}
                    onClick={() =>
                      run(
                        'dead-letters/resubmit',
                        {
                          status: ['FAILED', 'CANCELLED', 'EXPIRED'],
                          taskName: g.task_name,
                          queue: g.queue_name,
                          errorCode: g.error_code ?? undefined,
                        },
                        'resubmitted',
                      )
                    }
                  >
                    Resubmit {count(g.count)}
                  </button>
                </td>
              ) : null}
            </tr>
          ))}
        </tbody>
      </table>
      {data.length === 0 ? <p class="muted">No failed tasks.</p> : null}
    </section>
  );
}
