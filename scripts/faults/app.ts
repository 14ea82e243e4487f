/**
 * The fault run's tasks and workflow, defined once for both sides: the worker processes (`workerApp.ts`, whose
 * handlers record each execution) and the run itself (`harness.ts`, which only sends and starts).
 *
 * - `faults.work` waits a few milliseconds and returns its `n`;
 * - `faults.sum` adds its inputs;
 * - the workflow `faults.diamond`: `a` → (`b`, `c`) → `d` = b + c, so its result says whether every node ran on
 *   the right inputs (2n + 2 for a start parameter n: a = n, b = c = a + 1).
 *
 * Every retryable code is retried many times: a task of the run may end only COMPLETED, unless horsies loses track.
 */
import { z } from 'zod';
import { createApp, workflow } from '../../src/index.js';
import type { AppConfig, RetryPolicy, TaskContext } from '../../src/index.js';

/** Records one execution (the worker's side); the run's own app records nothing. */
export type RecordExecution = (ctx: TaskContext) => Promise<void>;

const RETRY: RetryPolicy = {
  maxRetries: 100,
  retryOn: ['WORKER_CRASHED', 'UNHANDLED_ERROR', 'TASK_TIMEOUT'],
  backoff: 'constant',
  baseDelayMs: 50,
};

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** The fault run's app: its tasks and its workflow. */
export function defineFaultApp(config: AppConfig, record: RecordExecution) {
  const app = createApp(config);
  const work = app.task({
    name: 'faults.work',
    input: z.object({ n: z.number().int(), ms: z.number().int().min(0) }),
    retry: RETRY,
    handler: async ({ n, ms }, ctx) => {
      await record(ctx);
      if (ms > 0) await sleep(ms);
      return n;
    },
  });
  const step = app.task({
    name: 'faults.step',
    input: z.object({ n: z.number().int() }),
    retry: RETRY,
    handler: async ({ n }, ctx) => {
      await record(ctx);
      await sleep(5);
      return n + 1;
    },
  });
  const sum = app.task({
    name: 'faults.sum',
    input: z.object({ values: z.array(z.number().int()) }),
    retry: RETRY,
    handler: async ({ values }, ctx) => {
      await record(ctx);
      return values.reduce((a, b) => a + b, 0);
    },
  });
  const wf = workflow(app, 'faults.diamond', { params: z.object({ n: z.number().int() }) });
  const a = wf.node(work, { id: 'a', input: { n: wf.params.n, ms: 5 } });
  const b = wf.node(step, { id: 'b', input: { n: a.result } });
  const c = wf.node(step, { id: 'c', input: { n: a.result } });
  const d = wf.node(sum, { id: 'd', input: { values: [b.result, c.result] } });
  const diamond = wf.build({ output: d });
  return { app, work, step, sum, diamond };
}

/** The result the diamond workflow must end with for the start parameter `n`. */
export function diamondResult(n: number): number {
  return 2 * n + 2;
}
