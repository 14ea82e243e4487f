/**
 * What the runs of a worker report as they go: the worker's events (`task:started`, `task:ran`, ...) and, when the
 * app has metrics, the run metrics. Every written batch of outcomes passes through {@link RunReports.onSettled},
 * whichever part wrote it (the completer, a run's own transaction), so it is counted once, there.
 */
import type { ClaimedTaskRow, TaskFinish, TaskFinishRow } from '../db/tasks.js';
import type { RunMetrics } from '../metrics/RunMetrics.js';
import type { CompleterHooks, CompleterResult } from './Completer.js';
import type { WorkerSink } from './events.js';
import type { RunReporter } from './Executor.js';

/** See the module comment. */
export class RunReports implements RunReporter, CompleterHooks {
  constructor(
    private readonly sink: WorkerSink,
    private readonly runs: RunMetrics | null,
  ) {}

  started(task: ClaimedTaskRow, attempt: number, startedAt: Date | null): void {
    this.runs?.started(task, startedAt);
    this.sink.emit('task:started', task.id, attempt);
  }

  ran(finish: TaskFinish): void {
    this.runs?.ran(finish);
    this.sink.emit('task:ran', finish.id, finish.status);
  }

  expired(task: ClaimedTaskRow): void {
    this.runs?.expired(task);
    this.sink.emit('task:expired', task.id);
  }

  committed(finish: TaskFinish, row: TaskFinishRow): void {
    this.sink.emit('task:ran', finish.id, finish.status);
    this.onSettled({ finished: [row], lost: [] }, [finish]);
  }

  stopped(task: ClaimedTaskRow): void {
    void this.sink.afterFinish([
      { id: task.id, status: 'STOPPED', workflow_id: task.workflow_id, workflow_node: task.workflow_node },
    ]);
  }

  /** A batch of outcomes was written (or found superseded): counted, then followed by the worker. */
  onSettled(result: CompleterResult, finishes: TaskFinish[]): void {
    this.runs?.settled(result.finished, finishes);
    this.sink.onSettled(result, finishes);
  }

  /** A write of outcomes failed (they stay RUNNING rows that the reaper recovers if no retry writes them). */
  onError(error: unknown): void {
    this.sink.fail('writing task outcomes failed', error);
  }
}
