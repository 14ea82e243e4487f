/**
 * Flow control in force, below the queues: rate limiters (their starts in the window, full or paused after an
 * upstream's 429), per-group tasks in flight against the queue's group limit, and the dedupe and debounce keys held.
 * `queue` narrows groups and keys to one queue.
 */
import type { JSX } from 'preact';
import type { FlowState, RateLimiterView } from '../../../contract.js';
import { Status } from '../components.js';
import { ago, count, duration } from '../format.js';
import { useApi } from '../hooks.js';

function limiterState(l: RateLimiterView): JSX.Element {
  if (l.state === 'paused')
    return (
      <span class="tag bad" title={l.pausedUntil ?? ''}>
        paused, ends {ago(l.pausedUntil)}
      </span>
    );
  if (l.state === 'full')
    return (
      <span class="tag" title={l.freeAt}>
        full, room {ago(l.freeAt)}
      </span>
    );
  return <span class="tag good">open</span>;
}

function More(props: { more: boolean; limit: number }): JSX.Element | null {
  return props.more ? <p class="muted">The first {props.limit} are shown.</p> : null;
}

export function FlowSection(props: { queue: string | null }): JSX.Element {
  const path = props.queue === null ? 'flow' : `flow?queue=${encodeURIComponent(props.queue)}`;
  const { data, error } = useApi<FlowState>(path);
  if (error) return <p class="error">{error}</p>;
  if (!data) return <p class="muted">loading…</p>;
  return (
    <section class="flow" data-testid="flow">
      <h2>Flow control{props.queue === null ? '' : ` of ${props.queue}`}</h2>
      {props.queue === null ? null : (
        <p>
          <a href="#/queues">all queues</a>
        </p>
      )}
      <h3>Rate limiters</h3>
      {data.limiters.length === 0 ? (
        <p class="muted">No rate limiter has started or paused a task yet.</p>
      ) : (
        <table data-testid="flow-limiters">
          <thead>
            <tr>
              <th>limiter</th>
              <th class="num">limit</th>
              <th>window</th>
              <th class="num">starts in window</th>
              <th class="num">room</th>
              <th>state</th>
            </tr>
          </thead>
          <tbody>
            {data.limiters.map((l) => (
              <tr
                key={l.key}
                data-limiter={l.key}
                data-state={l.state}
                data-paused-until={l.pausedUntil ?? ''}
              >
                <td class="mono">{l.key}</td>
                <td class="num">{count(l.maxStarts)}</td>
                <td>{duration(l.intervalMs)}</td>
                <td class="num" data-testid="limiter-used">
                  {count(l.used)}
                </td>
                <td class="num" data-testid="limiter-room">
                  {count(Math.max(0, l.maxStarts - l.used))}
                </td>
                <td data-testid="limiter-state">{limiterState(l)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <More more={data.limitersMore} limit={data.limit} />

      <h3>Groups in flight</h3>
      {data.groupLimits.length > 0 ? (
        <p data-testid="flow-group-limits">
          Group limits:{' '}
          {data.groupLimits.map((g, i) => (
            <span key={g.queue} data-queue={g.queue}>
              {i > 0 ? ', ' : ''}
              {g.queue} ({g.limit} per group)
            </span>
          ))}
        </p>
      ) : null}
      {data.groups.length === 0 ? (
        <p class="muted">No task of a group is claimed or running.</p>
      ) : (
        <table data-testid="flow-groups">
          <thead>
            <tr>
              <th>queue</th>
              <th>group</th>
              <th class="num">in flight</th>
              <th class="num">running</th>
              <th class="num">limit</th>
            </tr>
          </thead>
          <tbody>
            {data.groups.map((g) => (
              <tr
                key={`${g.queue}/${g.group}`}
                data-group={`${g.queue}/${g.group}`}
                class={g.limit !== null && g.inFlight >= g.limit ? 'full' : ''}
              >
                <td>{g.queue}</td>
                <td class="mono">{g.group}</td>
                <td class="num" data-testid="group-in-flight">
                  {g.inFlight}
                </td>
                <td class="num">{g.running}</td>
                <td class="num" data-testid="group-limit">
                  {g.limit ?? '–'}
                  {g.limit !== null && g.inFlight >= g.limit ? <span class="tag">at limit</span> : null}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <More more={data.groupsMore} limit={data.limit} />

      <h3>Keys held</h3>
      {data.keys.length === 0 ? (
        <p class="muted">No dedupe or debounce key is held.</p>
      ) : (
        <table data-testid="flow-keys">
          <thead>
            <tr>
              <th>task</th>
              <th>key</th>
              <th>kind</th>
              <th>queue</th>
              <th>status</th>
              <th>sent</th>
              <th>due</th>
              <th>held until</th>
            </tr>
          </thead>
          <tbody>
            {data.keys.map((k) => (
              <tr key={k.taskId} data-key={`${k.taskName}/${k.key}`} data-scope={k.scope}>
                <td>
                  <a href={`#/task/${encodeURIComponent(k.taskId)}`}>{k.taskName}</a>
                </td>
                <td class="mono">{k.key}</td>
                <td data-testid="key-kind">{k.scope === 'debounce' ? 'debounce' : `dedupe (${k.scope})`}</td>
                <td>{k.queue}</td>
                <td>
                  <Status status={k.status} />
                </td>
                <td>{ago(k.sentAt)}</td>
                <td data-testid="key-due" data-due={k.dueAt}>
                  {k.status === 'PENDING' ? ago(k.dueAt) : ''}
                </td>
                <td data-testid="key-held-until">
                  {k.heldUntil
                    ? ago(k.heldUntil)
                    : k.scope === 'finished'
                      ? 'its end, then its window'
                      : k.scope === 'running'
                        ? 'until it ends'
                        : 'until claimed'}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <More more={data.keysMore} limit={data.limit} />
    </section>
  );
}
