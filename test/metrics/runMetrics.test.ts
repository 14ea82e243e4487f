/**
 * A worker counts its runs by task and claim: a retry with no delay can be claimed and started again by the same
 * worker as soon as its outcome commits, before the worker has settled that outcome. The settling of the first run
 * must not take the second run's entry with it, or the second run's outcome goes uncounted.
 */
import { describe, expect, it } from 'vitest';
import type { ClaimedTaskRow, TaskFinish, TaskFinishRow } from '../../src/db/tasks.js';
import { HorsiesMetrics } from '../../src/metrics/Metrics.js';
import { RunMetrics } from '../../src/metrics/RunMetrics.js';
import { parseExposition, sum } from './scrape.js';

function claimed(generation: number): ClaimedTaskRow {
  return {
    id: 'task-1',
    task_name: 'm.flaky',
    queue_name: 'default',
    priority: 100,
    kwargs: {},
    claim_generation: generation,
    claim_token: `token-${generation}`,
    retry_count: generation - 1,
    max_retries: 1,
    attempt: generation,
    enqueued_at: new Date(),
    trace_context: null,
    workflow_id: null,
    workflow_node: null,
    workflow_node_id: null,
  };
}

function finish(generation: number, status: TaskFinish['status']): TaskFinish {
  return {
    id: 'task-1',
    workerId: 'w',
    token: `token-${generation}`,
    status,
    result: '{"err":{"code":"FLAKY","message":"no"}}',
    errorCode: 'FLAKY',
    errorMessage: 'no',
    failedReason: null,
    retryDelayMs: 0,
    crashed: false,
  };
}

function written(status: TaskFinishRow['status']): TaskFinishRow {
  return { id: 'task-1', status, workflow_id: null, workflow_node: null };
}

describe('run metrics', () => {
  it('count both outcomes of a retry claimed again before its first outcome was settled', async () => {
    const metrics = new HorsiesMetrics({ queues: ['default'], isTaskName: () => true });
    const runs = new RunMetrics(metrics);
    runs.started(claimed(1), new Date());
    const first = finish(1, 'RETRY');
    runs.ran(first);
    // The retry's outcome committed; the same worker claims and starts the task again before settling it.
    runs.started(claimed(2), new Date());
    runs.settled([written('PENDING')], [first]);
    const second = finish(2, 'FAILED');
    runs.ran(second);
    runs.settled([written('FAILED')], [second]);

    const samples = parseExposition(await metrics.registry.metrics());
    expect(sum(samples, 'horsies_tasks_started_total')).toBe(2);
    expect(sum(samples, 'horsies_tasks_retried_total', { error_code: 'FLAKY' })).toBe(1);
    expect(sum(samples, 'horsies_tasks_failed_total', { error_code: 'FLAKY' })).toBe(1);
    expect(sum(samples, 'horsies_task_run_duration_seconds_count')).toBe(2);
  });
});
