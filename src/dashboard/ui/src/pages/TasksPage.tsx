/**
 * Tasks: one tab per state (the asynq views scheduled, retrying and dead-letter among them), filters by queue,
 * task name, error code and time, search by id, and keyset pagination (next and back through the cursors seen).
 * The filters live in the URL, so a view can be bookmarked.
 */
import type { JSX } from 'preact';
import { useState } from 'preact/hooks';
import type { TaskPage, TaskRow } from '../../../contract.js';
import { hashWith, Pager, Status } from '../components.js';
import { ago, time } from '../format.js';
import { useApi } from '../hooks.js';
import type { PageProps } from './PageProps.js';

const TABS: { tab: string; label: string }[] = [
  { tab: 'pending', label: 'Pending' },
  { tab: 'scheduled', label: 'Scheduled' },
  { tab: 'retrying', label: 'Retrying' },
  { tab: 'running', label: 'Running' },
  { tab: 'completed', label: 'Completed' },
  { tab: 'failed', label: 'Failed' },
  { tab: 'cancelled', label: 'Cancelled' },
  { tab: 'expired', label: 'Expired' },
  { tab: 'dead', label: 'Dead letters' },
  { tab: 'finished', label: 'All finished' },
];

const FILTERS = ['queue', 'task', 'error', 'from', 'to'] as const;

function hashFor(query: URLSearchParams, changes: Record<string, string | null>): string {
  return hashWith('tasks', query, changes);
}

/** The time column of a tab, and its heading. */
function when(tab: string, row: TaskRow): [string, string] {
  if (tab === 'pending' || tab === 'scheduled' || tab === 'retrying') return ['runs', ago(row.enqueued_at)];
  if (tab === 'running') return ['claimed', ago(row.claimed_at)];
  return ['finished', ago(row.finished_at)];
}

export function TasksPage(props: PageProps): JSX.Element {
  const query = props.query;
  const tab = query.get('tab') ?? 'pending';
  const cursor = query.get('cursor');
  const [back, setBack] = useState<(string | null)[]>([]);
  const api = new URLSearchParams({ tab, limit: query.get('limit') ?? '50' });
  for (const f of FILTERS) {
    const v = query.get(f);
    if (v) api.set(f, f === 'from' || f === 'to' ? new Date(v).toISOString() : v);
  }
  if (cursor) api.set('cursor', cursor);
  const { data, error } = useApi<TaskPage>(`tasks?${api.toString()}`);
  const heading = data?.rows[0] ? when(tab, data.rows[0])[0] : 'time';
  const applyFilters = (e: Event): void => {
    e.preventDefault();
    const form = e.currentTarget as HTMLFormElement;
    const changes: Record<string, string | null> = { cursor: null };
    for (const f of FILTERS)
      changes[f] = (form.elements.namedItem(f) as HTMLInputElement).value.trim() || null;
    setBack([]);
    location.hash = hashFor(query, changes);
  };
  return (
    <section>
      <h1>Tasks</h1>
      <form
        class="search"
        onSubmit={(e) => {
          e.preventDefault();
          const id = (
            (e.currentTarget as HTMLFormElement).elements.namedItem('id') as HTMLInputElement
          ).value.trim();
          if (id) location.hash = `#/task/${encodeURIComponent(id)}`;
        }}
      >
        <input name="id" placeholder="task id" aria-label="task id" size={40} />
        <button type="submit">Go to task</button>
      </form>
      <div class="tabs" role="tablist">
        {TABS.map((t) => (
          <a
            key={t.tab}
            role="tab"
            href={hashFor(query, { tab: t.tab, cursor: null })}
            class={t.tab === tab ? 'active' : ''}
            data-tab={t.tab}
            onClick={() => setBack([])}
          >
            {t.label}
          </a>
        ))}
      </div>
      <form class="filters" onSubmit={applyFilters} key={query.toString()}>
        <label>
          queue <input name="queue" value={query.get('queue') ?? ''} />
        </label>
        <label>
          task name <input name="task" value={query.get('task') ?? ''} />
        </label>
        <label>
          error code <input name="error" value={query.get('error') ?? ''} />
        </label>
        <label>
          from <input name="from" type="datetime-local" value={query.get('from') ?? ''} />
        </label>
        <label>
          to <input name="to" type="datetime-local" value={query.get('to') ?? ''} />
        </label>
        <button type="submit">Filter</button>
        <a href={hashFor(new URLSearchParams({ tab }), {})} onClick={() => setBack([])}>
          clear
        </a>
      </form>
      {error ? <p class="error">{error}</p> : null}
      {!data ? (
        <p class="muted">loading…</p>
      ) : (
        <>
          <table data-testid="tasks">
            <thead>
              <tr>
                <th>id</th>
                <th>task</th>
                <th>queue</th>
                <th>status</th>
                <th>error</th>
                <th class="num">attempts</th>
                <th class="num">priority</th>
                <th>{heading}</th>
              </tr>
            </thead>
            <tbody>
              {data.rows.map((r) => (
                <tr key={r.id} data-id={r.id}>
                  <td class="mono">
                    <a href={`#/task/${r.id}`}>{r.id}</a>
                  </td>
                  <td>{r.task_name}</td>
                  <td>{r.queue_name}</td>
                  <td>
                    <Status status={r.status} />
                  </td>
                  <td>{r.error_code ?? ''}</td>
                  <td class="num">
                    {r.attempt}
                    {r.max_retries > 0 ? ` (${r.retry_count}/${r.max_retries} retries)` : ''}
                  </td>
                  <td class="num">{r.priority}</td>
                  <td title={time(r.finished_at ?? r.claimed_at ?? r.enqueued_at)}>{when(tab, r)[1]}</td>
                </tr>
              ))}
            </tbody>
          </table>
          {data.rows.length === 0 ? <p class="muted">No tasks match.</p> : null}
          <Pager
            back={back}
            setBack={setBack}
            cursor={cursor}
            nextCursor={data.nextCursor}
            go={(c) => (location.hash = hashFor(query, { cursor: c }))}
          />
        </>
      )}
    </section>
  );
}
