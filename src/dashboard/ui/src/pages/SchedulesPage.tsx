/**
 * Schedules: pattern, next and last runs with the last run's task status, paused and orphaned, and trigger,
 * pause and resume. Triggering needs the app's declaration (its task, input and queue), so a dashboard served
 * from a bare database URL offers only pause and resume.
 */
import type { JSX } from 'preact';
import type { ScheduleList, ScheduleRow } from '../../../contract.js';
import { ActionMessage, Status, useAction } from '../components.js';
import { ago, time } from '../format.js';
import { useApi } from '../hooks.js';
import type { PageProps } from './PageProps.js';

export function SchedulesPage(props: PageProps): JSX.Element {
  const { data, error, reload } = useApi<ScheduleList>('schedules');
  const [action, run] = useAction(reload);
  if (error) return <p class="error">{error}</p>;
  if (!data) return <p class="muted">loading…</p>;
  const path = (s: ScheduleRow, verb: string): string => `schedules/${encodeURIComponent(s.name)}/${verb}`;
  return (
    <section>
      <h1>Schedules</h1>
      <ActionMessage state={action} />
      <table data-testid="schedules">
        <thead>
          <tr>
            <th>schedule</th>
            <th>task</th>
            <th>pattern</th>
            <th>timezone</th>
            <th>state</th>
            <th>next run</th>
            <th>last run</th>
            <th>last task</th>
            <th class="num">runs</th>
            <th>last error</th>
            {props.config.actions ? <th /> : null}
          </tr>
        </thead>
        <tbody>
          {data.schedules.map((s) => (
            <tr key={s.name} data-schedule={s.name}>
              <td>{s.name}</td>
              <td>
                {s.task ? (
                  <a href={`#/tasks?tab=finished&task=${encodeURIComponent(s.task)}`}>{s.task}</a>
                ) : (
                  ''
                )}
              </td>
              <td>{s.pattern ?? ''}</td>
              <td>{s.timezone ?? ''}</td>
              <td data-testid="schedule-state">
                {s.paused ? <span class="tag">paused</span> : s.enabled === false ? 'disabled' : 'active'}
                {s.orphaned ? <span class="tag bad">orphaned</span> : null}
              </td>
              <td title={time(s.nextRunAt)}>
                {s.nextRunAt ? `${time(s.nextRunAt)} (${ago(s.nextRunAt)})` : ''}
              </td>
              <td title={time(s.lastRunAt)}>{ago(s.lastRunAt)}</td>
              <td data-testid="schedule-last-task">
                {s.lastTaskId ? (
                  <a href={`#/task/${encodeURIComponent(s.lastTaskId)}`}>
                    {s.lastTaskStatus ? <Status status={s.lastTaskStatus} /> : 'gone'}
                  </a>
                ) : (
                  ''
                )}
              </td>
              <td class="num">{s.runCount}</td>
              <td title={time(s.lastErrorAt)}>{s.lastError ?? ''}</td>
              {props.config.actions ? (
                <td class="buttons">
                  {data.fromApp && !s.orphaned ? (
                    <button
                      disabled={action.busy}
                      onClick={() => run(path(s, 'trigger'), {}, `triggered ${s.name}`)}
                    >
                      Trigger
                    </button>
                  ) : null}
                  <button
                    disabled={action.busy}
                    onClick={() =>
                      run(
                        path(s, s.paused ? 'resume' : 'pause'),
                        {},
                        s.paused ? `resumed ${s.name}` : `paused ${s.name}`,
                      )
                    }
                  >
                    {s.paused ? 'Resume' : 'Pause'}
                  </button>
                </td>
              ) : null}
            </tr>
          ))}
        </tbody>
      </table>
      {data.schedules.length === 0 ? <p class="muted">No schedules declared or stored.</p> : null}
      <p class="muted">
        {data.fromApp
          ? 'Orphaned: a stored schedule the app no longer declares; it is kept and never runs.'
          : 'Served from a database URL: only stored schedules are listed, and triggering needs the app module.'}{' '}
        Next run is empty until a scheduler first passes over a schedule, and after a resume until its next
        pass.
      </p>
    </section>
  );
}
