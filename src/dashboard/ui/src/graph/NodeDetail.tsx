/**
 * The detail of one workflow node, shown beside the graph when a node is clicked: what it waits for and how it
 * joins, its wired input (which value came from which upstream node), its task's input, result or error, its
 * attempts on a timeline, its latest heartbeats, its times, and links to its task page or child run.
 */
import type { JSX } from 'preact';
import type { WiredInput, WorkflowNode, WorkflowNodeDetail } from '../../../contract.js';
import { JsonBlock, Status } from '../components.js';
import { time } from '../format.js';
import { useApi } from '../hooks.js';
import { Gantt } from './Gantt.js';
import { SignalForm } from './SignalForm.js';

function path(steps: (string | number)[]): string {
  return steps.length === 0 ? '(whole)' : steps.map(String).join('.');
}

function source(w: WiredInput): string {
  if (w.kind === 'param') return `params.${path(w.from)}`;
  const from = w.nodeId ?? `#${w.node}`;
  return w.kind === 'outcome'
    ? `${from} (its whole outcome)`
    : `${from}.result${w.from.length ? `.${path(w.from)}` : ''}`;
}

function joinRule(n: WorkflowNode): string {
  const rule = n.join === 'quorum' ? `quorum ${n.minSuccess}/${n.dependencies.length}` : n.join;
  return n.allowFailedDeps ? `${rule}, runs after failed dependencies too` : rule;
}

export function NodeDetail(props: {
  workflowId: string;
  index: number;
  ids: Map<number, string>;
  onSelect: (index: number) => void;
  onClose: () => void;
}): JSX.Element {
  const { data, error, reload } = useApi<WorkflowNodeDetail>(
    `workflows/${encodeURIComponent(props.workflowId)}/nodes/${props.index}`,
  );
  if (error) return <aside class="node-detail error">{error}</aside>;
  if (!data) return <aside class="node-detail muted">loading node…</aside>;
  const n = data.node;
  const t = data.task;
  const envelope = data.result as { ok?: unknown; err?: { error_code?: string; message?: string } } | null;
  return (
    <aside class="node-detail" data-testid="node-detail" data-node={n.id} aria-label={`node ${n.id}`}>
      <div class="node-detail-head">
        <h3>
          {n.id} <Status status={n.status} />
        </h3>
        <button type="button" onClick={props.onClose} aria-label="close node detail">
          ×
        </button>
      </div>
      <table>
        <tbody>
          <tr>
            <th>{n.subworkflow ? 'workflow' : 'task'}</th>
            <td>{n.subworkflow ?? n.task}</td>
          </tr>
          <tr>
            <th>waits for</th>
            <td data-testid="node-waits">
              {n.dependencies.length === 0
                ? 'nothing (a root)'
                : n.dependencies.map((d) => (
                    <button type="button" class="chip" key={d} onClick={() => props.onSelect(d)}>
                      {props.ids.get(d) ?? `#${d}`}
                    </button>
                  ))}
            </td>
          </tr>
          {n.dependencies.length > 0 ? (
            <tr>
              <th>join</th>
              <td>{joinRule(n)}</td>
            </tr>
          ) : null}
          <tr>
            <th>created</th>
            <td>{time(data.createdAt)}</td>
          </tr>
          <tr>
            <th>enqueued</th>
            <td>{time(data.enqueuedAt) || '—'}</td>
          </tr>
          {t ? (
            <tr>
              <th>started</th>
              <td>{time(t.started_at) || '—'}</td>
            </tr>
          ) : null}
          <tr>
            <th>finished</th>
            <td>{time(data.completedAt ?? t?.finished_at) || '—'}</td>
          </tr>
          {n.errorCode ? (
            <tr>
              <th>error</th>
              <td class="error">{n.errorCode}</td>
            </tr>
          ) : null}
        </tbody>
      </table>
      <p>
        {n.taskId ? (
          <a href={`#/task/${encodeURIComponent(n.taskId)}`} data-testid="node-task-link">
            task page
          </a>
        ) : null}
        {n.childWorkflowId ? (
          <a href={`#/workflow/${encodeURIComponent(n.childWorkflowId)}`} data-testid="node-child-link">
            child run
          </a>
        ) : null}
      </p>
      {n.wait === 'signal' && (n.status === 'PENDING' || n.status === 'READY' || n.status === 'RUNNING') ? (
        <SignalForm workflowId={props.workflowId} nodeId={n.id} onDone={reload} />
      ) : null}
      <h4>Wired input</h4>
      {data.wired.length === 0 ? (
        <p class="muted">no references: its input is static</p>
      ) : (
        <table data-testid="node-wired">
          <thead>
            <tr>
              <th>input field</th>
              <th>comes from</th>
            </tr>
          </thead>
          <tbody>
            {data.wired.map((w, i) => (
              <tr key={i} data-from={w.nodeId ?? 'params'}>
                <td class="mono">{path(w.to)}</td>
                <td class="mono">{source(w)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {data.hidden ? (
        <p class="muted">inputs and results hidden by the server</p>
      ) : (
        <>
          <h4>Input{t ? ' (as enqueued)' : ' (static part)'}</h4>
          <JsonBlock value={t ? t.input : data.staticInput} testid="node-input" />
          {envelope ? (
            <>
              <h4>{'err' in envelope ? 'Error' : 'Result'}</h4>
              <JsonBlock value={'ok' in envelope ? envelope.ok : envelope.err} testid="node-result" />
            </>
          ) : null}
        </>
      )}
      {t ? (
        <>
          <h4>Attempts</h4>
          {t.attempts.length > 0 ? (
            <Gantt
              testid="node-attempts"
              caption={`${t.attempts.length} attempt${t.attempts.length === 1 ? '' : 's'}`}
              rows={t.attempts.map((a) => ({
                key: String(a.attempt),
                label: `#${a.attempt} ${a.error_code ?? ''}`,
                status: a.outcome,
                queuedAt: null,
                startedAt: a.started_at,
                finishedAt: a.finished_at,
              }))}
            />
          ) : (
            <p class="muted">none finished yet</p>
          )}
          {t.attempts
            .filter((a) => a.error_message)
            .map((a) => (
              <p key={a.attempt} class="error" data-testid="node-attempt-error">
                #{a.attempt} {a.error_code}: {a.error_message}
              </p>
            ))}
          <h4>Heartbeats</h4>
          {t.heartbeats.length === 0 ? (
            <p class="muted">none kept</p>
          ) : (
            <p class="small">
              {t.heartbeats.length} latest, last {time(t.heartbeats[0]?.sent_at)} from{' '}
              {t.heartbeats[0]?.hostname ?? t.heartbeats[0]?.sender_id}
            </p>
          )}
        </>
      ) : null}
    </aside>
  );
}
