/** Maps stored rows to the public {@link TaskInfo} shape. */
import type { AttemptRow, TaskRow } from '../db/tasks.js';
import type { AttemptOutcome, JsonValue, TaskAttempt, TaskInfo, TaskStatus } from '../types.js';

/** The public view of a task row. */
export function toTaskInfo(row: TaskRow, attempts?: AttemptRow[]): TaskInfo {
  const info: TaskInfo = {
    id: row.id,
    taskName: row.task_name,
    queueName: row.queue_name,
    priority: row.priority,
    status: row.status as TaskStatus,
    input: row.kwargs as JsonValue,
    sentAt: row.sent_at,
    enqueuedAt: row.enqueued_at,
    claimedAt: row.claimed_at,
    startedAt: row.started_at,
    completedAt: row.completed_at,
    failedAt: row.failed_at,
    finishedAt: row.finished_at,
    result: (row.result ?? null) as JsonValue | null,
    errorCode: row.error_code,
    failedReason: row.failed_reason,
    claimedByWorkerId: row.claimed_by_worker_id,
    claimGeneration: row.claim_generation,
    claimExpiresAt: row.claim_expires_at,
    goodUntil: row.good_until,
    retryCount: row.retry_count,
    maxRetries: row.max_retries,
    nextRetryAt: row.next_retry_at,
    attemptCount: row.attempt,
    resubmitCount: row.resubmit_count,
    resubmittedAt: row.resubmitted_at,
    cancelRequestedAt: row.cancel_requested_at,
    idempotencyKey: row.idempotency_key,
    group: row.group_key ?? null,
    dedupe:
      row.dedupe_key === null || row.dedupe_key === undefined || row.dedupe_scope === null
        ? null
        : { key: row.dedupe_key, scope: row.dedupe_scope, held: row.dedupe_held === true },
    workerHostname: row.worker_hostname,
    workerPid: row.worker_pid,
    workerProcessName: row.worker_process_name,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    progress:
      row.progress_at === null
        ? null
        : { value: row.progress as JsonValue, at: row.progress_at, attempt: row.progress_attempt ?? 0 },
    workflow:
      row.workflow_id === null || row.workflow_node === null
        ? null
        : { id: row.workflow_id, nodeId: row.workflow_node_id ?? '', nodeIndex: row.workflow_node },
  };
  if (attempts) info.attempts = attempts.map(toTaskAttempt);
  return info;
}

function toTaskAttempt(row: AttemptRow): TaskAttempt {
  return {
    attempt: row.attempt,
    outcome: row.outcome as AttemptOutcome,
    willRetry: row.will_retry,
    startedAt: row.started_at,
    finishedAt: row.finished_at,
    errorCode: row.error_code,
    errorMessage: row.error_message,
    failedReason: row.failed_reason,
    workerId: row.worker_id,
    workerHostname: row.worker_hostname,
    workerPid: row.worker_pid,
    workerProcessName: row.worker_process_name,
  };
}
