/**
 * Workflows, newest first: filter by status and name, keyset pagination (next and back through the cursors
 * seen), each row linking to its graph. The filters live in the URL.
 */
import type { JSX } from 'preact';
import { useState } from 'preact/hooks';
import type { WorkflowPage } from '../../../contract.js';
import { hashWith, Pager, Status } from '../components.js';
import { ago, time } from '../format.js';
import { useApi } from '../hooks.js';
import type { PageProps } from './PageProps.js';

const STATUSES = ['', 'PENDING', 'RUNNING', 'PAUSED', 'COMPLETED', 'FAILED', 'CANCELLED'];

function hashFor(query: URLSearchParams, changes: Record<string, string | null>): string {
  return hashWith('workflows', query, changes);
}

export function WorkflowsPage(props: PageProps): JSX.Element {
  const query = props.query;
  const cursor = query.get('cursor');
  const [back, setBack] = useState<(string | null)[]>([]);
  const api = new URLSearchParams({ limit: query.get('limit') ?? '50' });
  for (const f of ['status', 'name', 'parent', 'cursor']) {
    const v = query.get(f);
    if (v) api.set(f, v);
  }
  const { data, error } = useApi<WorkflowPage>(`workflows?${api.toString()}`);
  return (
    <section>
      <h1>Workflows</h1>
      <form
        class="filters"
        key={query.toString()}
        onSubmit={(e) => {
          e.preventDefault();
          const form = e.currentTarget as HTMLFormElement;
          const value = (name: string): string | null =>
            (form.elements.namedItem(name) as HTMLInputElement | HTMLSelectElement).value.trim() || null;
          setBack([]);
          location.hash = hashFor(query, {
            status: value('status'),
            name: value('name'),
            parent: value('parent'),
            cursor: null,
          });
        }}
      >
        <label>
          status{' '}
          <select name="status" value={query.get('status') ?? ''}>
            {STATUSES.map((s) => (
              <option key={s} value={s}>
                {s || 'any'}
              </option>
            ))}
          </select>
        </label>
        <label>
          name <input name="name" value={query.get('name') ?? ''} />
        </label>
        <label>
          parent run <input name="parent" value={query.get('parent') ?? ''} placeholder="workflow id" />
        </label>
        <button type="submit">Filter</button>
        <a href="#/workflows" onClick={() => setBack([])}>
          clear
        </a>
      </form>
      {error ? <p class="error">{error}</p> : null}
      {!data ? (
        <p class="muted">loading…</p>
      ) : (
        <>
          <table data-testid="workflows">
            <thead>
              <tr>
                <th>id</th>
                <th>name</th>
                <th>status</th>
                <th class="num">nodes done</th>
                <th>error</th>
                <th>sent</th>
                <th>completed</th>
              </tr>
            </thead>
            <tbody>
              {data.rows.map((w) => (
                <tr key={w.id} data-id={w.id}>
                  <td class="mono">
                    <a href={`#/workflow/${encodeURIComponent(w.id)}`}>{w.id}</a>
                  </td>
                  <td>
                    {w.name}
                    {w.parent_workflow_id ? (
                      <a
                        class="tag"
                        href={`#/workflow/${encodeURIComponent(w.parent_workflow_id)}`}
                        title={`a child of ${w.parent_workflow_id}`}
                      >
                        sub-workflow
                      </a>
                    ) : null}
                  </td>
                  <td>
                    <Status status={w.status} />
                  </td>
                  <td class="num">
                    {w.nodes_terminal}/{w.nodes_total}
                  </td>
                  <td>{w.error_code ?? ''}</td>
                  <td title={time(w.sent_at)}>{ago(w.sent_at)}</td>
                  <td title={time(w.completed_at)}>{ago(w.completed_at)}</td>
                </tr>
              ))}
            </tbody>
          </table>
          {data.rows.length === 0 ? <p class="muted">No workflows match.</p> : null}
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
