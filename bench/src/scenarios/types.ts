/** What a scenario is, and what one run of it (a sample) returns. */
import type { BenchEnv, RecoverySettings, Subject } from '../peers/types.js';

/** The sizes of a run; `--quick` shrinks them. */
export interface Sizes {
  bulk: number[];
  drain: number[];
  latencyTasks: number;
  latencyWarmup: number;
  backlogTotal: number;
  backlogMeasured: number;
  recoveryTasks: number;
  /** Multi-process: worker processes per case (each at concurrency 10), and the tasks drained. */
  processes: number[];
  multiprocessTasks: number;
  /** Realistic handler: tasks drained (each handler awaits a 5 ms timer, concurrency 50). */
  realisticTasks: number;
}

export interface RunContext {
  env: BenchEnv;
  sizes: Sizes;
  recovery: RecoverySettings;
}

/** One figure of a scenario's table. */
export interface Column {
  key: string;
  label: string;
  better: 'higher' | 'lower';
  /** Digits after the point. Default 0. */
  decimals?: number;
  /** Unit when it is not the scenario's (e.g. `x` for a ratio). */
  unit?: string;
  /** Shown in a second table under the main one, with this heading (e.g. the lock waits beside a rate). */
  table?: string;
}

/** A row of a scenario's table: a subject, possibly with a scenario-specific parameter. */
export interface Row {
  id: string;
  subject: Subject;
  /** Bulk enqueue: tasks per batch call. */
  chunk?: number;
}

/** One measured configuration of a scenario (a size, for example). Each case runs for every row. */
export interface Case {
  key: string;
  label: string;
}

/** The outcome of one sample: figures by column key, plus anything worth keeping in the JSON. */
export interface SampleResult {
  values: Record<string, number>;
  raw?: unknown;
}

/** Thrown by a scenario for a row it does not measure. */
export class SkipError extends Error {
  constructor(reason: string) {
    super(reason);
    this.name = 'SkipError';
  }
}

export interface Scenario {
  /** Command-line name. */
  name: string;
  title: string;
  unit: string;
  /** How it is measured, one paragraph (printed above the table). */
  method(ctx: RunContext): string;
  columns(ctx: RunContext): Column[];
  cases(ctx: RunContext): Case[];
  rows(subjects: Subject[]): Row[];
  /** Measures the baseline subjects too (see {@link Subject.baseline}); the other scenarios leave them out. */
  baselines?: boolean;
  /** Rounds to run when `--rounds` is not given. */
  defaultRounds(quick: boolean): number;
  /** Longest a sample may take before it is reported as a timeout. */
  timeoutMs(c: Case, ctx: RunContext): number;
  run(row: Row, c: Case, ctx: RunContext): Promise<SampleResult>;
}
