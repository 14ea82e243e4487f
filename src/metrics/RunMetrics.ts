/**
 * A worker's runs, counted from its own events: a start (with the time the task waited), the run's end (its
 * duration) and the written outcome (the status the database gave it, which may differ from what the handler
 * asked for: a retry past `good_until` fails, a retry of a task with a cancel request is cancelled, a finish whose
 * claim was lost writes nothing). No statement runs for any of it.
 */
import type { ClaimedTaskRow, TaskFinish, TaskFinishRow } from '../db/tasks.js';
import type { HorsiesMetrics } from './Metrics.js';

interface Held {
  queue: string;
  task: string;
  /** performance.now() at the start. */
  startedAt: number;
  /** The run's duration was observed (at its end, or at its written outcome when no end was reported). */
  timed: boolean;
  /** The claim token the run started under. */
  token: string;
  /**
   * An earlier run of the same task still held: a retry claimed again as soon as its outcome was committed can
   * start here before that outcome is settled, and the two runs must not share an entry.
   */
  earlier: Held | null;
}

/** Counts one worker's runs into the app's metrics. */
export class RunMetrics {
  private readonly held = new Map<string, Held>();

  constructor(private readonly metrics: HorsiesMetrics) {}

  /** A run started; `startedAt` is the database's start time, compared with `enqueued_at` on the same clock. */
  started(task: ClaimedTaskRow, startedAt: Date | null): void {
    this.held.set(task.id, {
      queue: task.queue_name,
      task: task.task_name,
      startedAt: performance.now(),
      timed: false,
      token: task.claim_token,
      earlier: this.held.get(task.id) ?? null,
    });
    const waited = startedAt === null ? 0 : (startedAt.getTime() - task.enqueued_at.getTime()) / 1000;
    this.metrics.started(task.queue_name, task.task_name, waited);
  }

  /** The task expired when it was about to start. */
  expired(task: ClaimedTaskRow): void {
    this.metrics.expired(task.queue_name, task.task_name);
  }

  /** A run ended; its outcome is on its way to the database. */
  ran(finish: TaskFinish): void {
    const held = this.find(finish.id, finish.token);
    if (held) this.time(held);
  }

  /**
   * Outcomes were written (`written`) or found superseded; `finishes` are what was asked for, every one of them
   * now settled.
   */
  settled(written: readonly TaskFinishRow[], finishes: readonly TaskFinish[]): void {
    const asked = finishes.length === 1 ? null : new Map(finishes.map((f) => [f.id, f]));
    for (const row of written) {
      const finish = asked === null ? finishes[0] : asked.get(row.id);
      if (!finish || finish.id !== row.id) continue;
      const held = this.find(finish.id, finish.token);
      if (!held) continue;
      this.time(held);
      switch (row.status) {
        case 'COMPLETED':
          this.metrics.outcome(held.queue, held.task, 'completed');
          break;
        case 'CANCELLED':
          this.metrics.outcome(held.queue, held.task, 'cancelled');
          break;
        case 'FAILED':
          this.metrics.outcome(held.queue, held.task, 'failed', finish.errorCode);
          break;
        case 'PENDING':
          // A release hands the task back as if it never ran: not a retry.
          if (finish.status === 'RETRY')
            this.metrics.outcome(held.queue, held.task, 'retried', finish.errorCode);
          break;
      }
    }
    for (const finish of finishes) this.forget(finish.id, finish.token);
  }

  // Runs are held by task id, each with the earlier runs of its task still held (rarely any): no key is built.
  private find(id: string, token: string | null): Held | null {
    for (let held = this.held.get(id) ?? null; held !== null; held = held.earlier) {
      if (held.token === token) return held;
    }
    return null;
  }

  private forget(id: string, token: string | null): void {
    let later: Held | null = null;
    for (let held = this.held.get(id) ?? null; held !== null; later = held, held = held.earlier) {
      if (held.token !== token) continue;
      if (later) later.earlier = held.earlier;
      else if (held.earlier) this.held.set(id, held.earlier);
      else this.held.delete(id);
      return;
    }
  }

  private time(held: Held): void {
    if (held.timed) return;
    held.timed = true;
    this.metrics.ran(held.queue, held.task, (performance.now() - held.startedAt) / 1000);
  }
}
