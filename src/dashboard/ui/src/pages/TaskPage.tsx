/** One task: its timeline, input, result or error, attempts, heartbeats, and cancel or resubmit. */
import type { JSX } from 'preact';
import type { TaskDetail } from '../../../contract.js';
import { ActionMessage, JsonBlock, Status, useAction } from '../components.js';
import { ago, time } from '../format.js';
import { Gantt } from '../graph/Gantt.js';
import { useApi } from '../hooks.js';
import type { PageProps } from './PageProps.js';
import { TaskSteps } from './TaskSteps.js';

const TERMINAL = ['COMPLETED', 'FAILED', 'CANCELLED', 'EXPIRED'];

/** A fraction from 0 to 1 when the value reads as one: a number, `{ done, total }` or `{ percent }`. */
function fraction(value: unknown): number | null {
  if (typeof value === 'number' && value >= 0 && value <= 1) return value;
  if (typeof value !== 'object' || value === null) return null;
  const v = value as Record<string, unknown>;
  const done = v.done ?? v.current ?? v.completed;
  if (typeof done === 'number' && typeof v.total === 'number' && v.total > 0) {
    return Math.min(1, Math.max(0, done / v.total));
  }
  if (typeof v.percent === 'number') return Math.min(1, Math.max(0, v.percent / 100));
  return null;
}

/** The trace id of a W3C traceparent (`00-<trace id>-<span id>-<flags>`). */
function traceId(traceparent: string): string {
  return traceparent.split('-')[1] ?? traceparent;
}

/** The latest progress report: a bar when it reads as a fraction, and the value itself. */
function Progress(props: { task: TaskDetail }): JSX.Element {
  const t = props.task;
  const share = fraction(t.progress);
  const stale = t.progress_attempt !== t.attempt;
  return (
    <div data-testid="task-progress">
      <h2>Progress</h2>
      {share !== null ? (
        <p>
          <progress max={1} value={share} /> {Math.round(share * 100)}%
        </p>
      ) : null}
      <JsonBlock value={t.progress} testid="task-progress-value" />
      <p class="muted">
        reported {ago(t.progress_at)} by attempt {t.progress_attempt}
        {stale ? ' (an earlier attempt)' : ''}
      </p>
    </div>
  );
}

export function TaskPage(props: PageProps): JSX.Element {
  const id = props.rest[0] ?? '';
  const { data, error, reload } = useApi<TaskDetail>(`tasks/${encodeURIComponent(id)}`);
  const [action, run] = useAction(reload);
  if (error) return <p class="error">{error}</p>;
  if (!data) return <p class="muted">loading…</p>;
  const t = data;
  const timeline: [string, string | null][] = [
    ['sent', t.sent_at],
    ['enqueued (runs at)', t.enqueued_at],
    ['claimed', t.claimed_at],
    ['started', t.started_at],
    ['cancel requested', t.cancel_requested_at],
    ['next retry', t.next_retry_at],
    ['finished', t.finished_at],
    ['resubmitted', t.resubmitted_at],
    ['good until', t.good_until],
  ];
  const envelope = t.result as { ok?: unknown; err?: unknown } | null;
  return (
    <section>
      <h1>
        {t.task_name} <Status status={t.status} />
      </h1>
      <p class="mono" data-testid="task-id">
        {t.id}
      </p>
      <p>
        queue <a href={`#/tasks?tab=pending&queue=${encodeURIComponent(t.queue_name)}`}>{t.queue_name}</a> ·
        priority {t.priority} · attempt {t.attempt} · retries {t.retry_count}/{t.max_retries} · resubmitted{' '}
        {t.resubmit_count}×{t.claimed_by_worker_id ? ` · worker ${t.claimed_by_worker_id}` : ''}
        {t.group_key !== null && t.group_key !== undefined ? ` · group ${t.group_key}` : ''}
      </p>
      {props.config.actions ? (
        <div class="actions">
          {!TERMINAL.includes(t.status) ? (
            <button
              disabled={action.busy}
              onClick={() => run(`tasks/${encodeURIComponent(t.id)}/cancel`, {}, 'cancel sent')}
            >
              Cancel
            </button>
          ) : null}
          {['FAILED', 'CANCELLED', 'EXPIRED'].includes(t.status) ? (
            <button
              disabled={action.busy}
              onClick={() => run(`tasks/${encodeURIComponent(t.id)}/resubmit`, {}, 'resubmitted')}
            >
              Resubmit
            </button>
          ) : null}
        </div>
      ) : null}
      <ActionMessage state={action} />
      {t.progress_at !== null ? <Progress task={t} /> : null}
      {t.trace_context ? (
        <p class="muted" data-testid="task-trace">
          trace <span class="mono">{traceId(t.trace_context.traceparent)}</span>
        </p>
      ) : null}
      <div class="columns">
        <div>
          <h2>Timeline</h2>
          <table data-testid="timeline">
            <tbody>
              {timeline
                .filter(([, at]) => at)
                .map(([label, at]) => (
                  <tr key={label}>
                    <th>{label}</th>
                    <td>{time(at)}</td>
                    <td class="muted">{ago(at)}</td>
                  </tr>
                ))}
            </tbody>
          </table>
        </div>
        <div>
          <h2>Input</h2>
          {t.hidden ? (
            <p class="muted">hidden by the server</p>
          ) : (
            <JsonBlock value={t.input} testid="task-input" />
          )}
          <h2>{envelope && 'err' in envelope ? 'Error' : 'Result'}</h2>
          {t.error_code ? (
            <p>
              <span class="tag bad">{t.error_code}</span> {t.failed_reason ?? ''}
            </p>
          ) : null}
          {t.hidden ? (
            <p class="muted">hidden by the server</p>
          ) : envelope ? (
            <JsonBlock value={'ok' in envelope ? envelope.ok : envelope.err} testid="task-result" />
          ) : (
            <p class="muted">none yet</p>
          )}
        </div>
      </div>
      <h2>Attempts</h2>
      <table data-testid="attempts">
        <thead>
          <tr>
            <th class="num">#</th>
            <th>outcome</th>
            <th>started</th>
            <th>finished</th>
            <th>error</th>
            <th>worker</th>
          </tr>
        </thead>
        <tbody>
          {t.attempts.map((a) => (
            <tr key={a.attempt}>
              <td class="num">{a.attempt}</td>
              <td>
                <Status status={a.outcome} />
                {a.will_retry ? ' (retried)' : ''}
              </td>
              <td>{time(a.started_at)}</td>
              <td>{time(a.finished_at)}</td>
              <td>
                {a.error_code ?? ''} {a.error_message ?? ''}
              </td>
              <td class="mono">{a.worker_id ?? ''}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {t.attempts.length === 0 ? (
        <p class="muted">No attempt finished yet.</p>
      ) : (
        <Gantt
          testid="attempt-timeline"
          caption="attempts on one time axis"
          rows={t.attempts.map((a) => ({
            key: String(a.attempt),
            label: `#${a.attempt}${a.error_code ? ` ${a.error_code}` : ''}`,
            status: a.outcome,
            queuedAt: null,
            startedAt: a.started_at,
            finishedAt: a.finished_at,
          }))}
        />
      )}
      <TaskSteps id={id} />
      <h2>Heartbeats (latest 20)</h2>
      <table data-testid="heartbeats">
        <thead>
          <tr>
            <th>role</th>
            <th>sent</th>
            <th>sender</th>
            <th>host</th>
          </tr>
        </thead>
        <tbody>
          {t.heartbeats.map((h) => (
            <tr key={`${h.role}${h.sent_at}`}>
              <td>{h.role}</td>
              <td>
                {time(h.sent_at)} <span class="muted">{ago(h.sent_at)}</span>
              </td>
              <td class="mono">{h.sender_id}</td>
              <td>
                {h.hostname ?? ''}
                {h.pid ? `:${h.pid}` : ''}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {t.heartbeats.length === 0 ? <p class="muted">No heartbeats kept.</p> : null}
    </section>
  );
}
