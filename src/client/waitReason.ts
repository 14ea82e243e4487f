/**
 * Why a PENDING task has not started yet, in words, for `getTask` and `horsies tasks show`: its start time has not
 * come, its queue is paused, one of its rate limiters is out of room or paused, or its group is at its queue's
 * limit. Null when nothing holds it back (it waits for a free worker slot).
 */
import type { Database } from '../db/Database.js';
import { TaskFlowState } from '../db/flow.js';
import type { TaskRow } from '../db/tasks.js';

/** The reason `row` (a PENDING task) waits, or null. */
export async function waitReason(db: Database, row: TaskRow): Promise<string | null> {
  if (row.status !== 'PENDING') return null;
  const [state] = await db.run(TaskFlowState, {
    queue: row.queue_name,
    taskName: row.task_name,
    group: row.group_key ?? null,
  });
  if (!state) return null;
  if (row.enqueued_at.getTime() > state.now.getTime()) {
    return row.retry_count > 0 || row.attempt > 0
      ? `retry scheduled for ${row.enqueued_at.toISOString()}`
      : `scheduled for ${row.enqueued_at.toISOString()}`;
  }
  if (state.paused) return `queue "${row.queue_name}" is paused`;
  if (state.limited_until !== null) {
    return `rate limited until ${state.limited_until.toISOString()} (${state.limited_by ?? 'limiter'})`;
  }
  if (
    state.group_limit !== null &&
    state.group_in_flight !== null &&
    state.group_in_flight >= state.group_limit
  ) {
    return `group "${row.group_key}" at its limit (${state.group_in_flight} of ${state.group_limit} in flight)`;
  }
  return null;
}
