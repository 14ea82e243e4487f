/**
 * `ctx.step(name, fn)` of one run: durable steps inside a task. The first call of a run reads the results its
 * task's earlier attempts stored; a step found there returns its stored result without running `fn`, and a step
 * not found runs `fn` and stores its result (JSON only) before returning it. The write is fenced on the run's
 * claim exactly as progress is (`runFenceSql`): a run whose claim was lost stores nothing and its step throws
 * `TASK_CLAIM_LOST`, so a stale run cannot write a result the run that replaced it would then trust.
 *
 * A step's result is returned as stored (its JSON read back), on the first run as on a replay, so both see the
 * same value. A name used twice in one run is refused: each step needs its own name.
 */
import type { Database } from '../db/Database.js';
import { TaskStepList, TaskStepSave } from '../db/progress.js';
import type { RunFence } from '../db/progress.js';
import { HorsiesError } from '../errors.js';
import { toCanonicalJson } from '../json.js';
import { isStorableText } from '../types.js';

/** The stored steps of one run, and the writes of its new ones. */
export class StepJournal {
  private stored: Promise<Map<string, unknown>> | null = null;
  private readonly used = new Set<string>();
  private seq = 0;

  constructor(
    private readonly db: Database,
    private readonly fence: RunFence,
  ) {}

  /** Runs the step `name` once across the task's attempts; see the module comment. */
  async run<T>(name: string, fn: () => T | Promise<T>): Promise<T> {
    if (typeof name !== 'string' || name.length === 0 || name.length > 255 || !isStorableText(name)) {
      throw new HorsiesError(
        'STEP_INVALID',
        `task ${this.fence.id}: a step name must be 1 to 255 characters, without NUL or a lone surrogate`,
      );
    }
    if (this.used.has(name)) {
      throw new HorsiesError(
        'STEP_INVALID',
        `task ${this.fence.id}: step "${name}" is used twice in one run`,
      );
    }
    this.used.add(name);
    const stored = await (this.stored ??= this.load());
    if (stored.has(name)) return stored.get(name) as T;
    const json = toCanonicalJson(await fn(), `step "${name}"`);
    const rows = await this.db.run(TaskStepSave, {
      ...this.fence,
      name,
      seq: this.nextSeq(stored),
      result: json,
    });
    if (rows.length === 0) {
      throw new HorsiesError(
        'TASK_CLAIM_LOST',
        `task ${this.fence.id}: step "${name}" was not stored: this run no longer holds the task's claim`,
      );
    }
    const value = JSON.parse(json) as T;
    stored.set(name, value);
    return value;
  }

  private async load(): Promise<Map<string, unknown>> {
    const rows = await this.db.run(TaskStepList, { taskId: this.fence.id });
    this.seq = rows.length;
    return new Map(rows.map((r) => [r.name, r.result]));
  }

  private nextSeq(stored: Map<string, unknown>): number {
    this.seq = Math.max(this.seq, stored.size) + 1;
    return this.seq;
  }
}
