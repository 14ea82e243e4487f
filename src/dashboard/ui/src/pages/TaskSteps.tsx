/** The durable steps of a task (`ctx.step()`), on its page: each step's name, result and the attempt that stored it. */
import type { JSX } from 'preact';
import type { TaskSteps as Steps } from '../../../contract.js';
import { JsonBlock } from '../components.js';
import { time } from '../format.js';
import { useApi } from '../hooks.js';

export function TaskSteps(props: { id: string }): JSX.Element | null {
  const { data } = useApi<Steps>(`tasks/${encodeURIComponent(props.id)}/steps`);
  if (!data || data.steps.length === 0) return null;
  return (
    <>
      <h2>Steps</h2>
      <table data-testid="task-steps">
        <thead>
          <tr>
            <th>step</th>
            <th class="num">attempt</th>
            <th>stored</th>
            <th>result</th>
          </tr>
        </thead>
        <tbody>
          {data.steps.map((s) => (
            <tr key={s.name}>
              <td>{s.name}</td>
              <td class="num">{s.attempt}</td>
              <td>{time(s.storedAt)}</td>
              <td>
                {data.hidden ? (
                  <span class="muted">hidden</span>
                ) : (
                  <JsonBlock value={s.result} testid="step-result" />
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </>
  );
}
