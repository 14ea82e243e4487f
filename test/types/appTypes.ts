/**
 * Type expectations of the app's queues and the tasks' error codes, checked by `tsc` (`npm run typecheck` covers
 * test/) and by `types.test.ts`, which also proves each `@ts-expect-error` below marks a real error of the kind
 * its note names. Compiled only, never run.
 */
import { z } from 'zod';
import { TaskError, createApp, workflow } from '../../src/index.js';
import type { BuiltinErrorCode, TaskResult, WorkflowHandle } from '../../src/index.js';

const app = createApp({
  databaseUrl: 'postgres://unused@127.0.0.1/unused',
  queues: [{ name: 'default', priority: 10 }, { name: 'emails', priority: 1 }, 'crawl'],
});

export const welcome = app.task({
  name: 'emails.welcome',
  queue: 'emails',
  input: z.object({ email: z.string() }),
  errors: ['BAD_ADDRESS', 'MAILBOX_FULL'],
  handler: ({ email }) => (email.includes('@') ? { sent: true } : new TaskError('BAD_ADDRESS', email)),
});

export const untyped = app.task({
  name: 'any.codes',
  input: z.object({ n: z.number() }),
  handler: ({ n }) => (n > 0 ? n : new TaskError('ANYTHING_GOES', 'no codes declared')),
});

export function unknownQueueInTask(): void {
  app.task({
    name: 'x',
    input: z.object({}),
    // @ts-expect-error queue: "nope" is not one of the app's queues
    queue: 'nope',
    handler: () => 1,
  });
}

export async function unknownQueueInSend(): Promise<void> {
  await welcome.send({ email: 'a@b' }, { queue: 'crawl' });
  // @ts-expect-error queue: "nope" is not one of the app's queues
  await welcome.send({ email: 'a@b' }, { queue: 'nope' });
  await welcome.sendMany([
    { input: { email: 'a@b' }, queue: 'default' },
    // @ts-expect-error queue: "elsewhere" is not one of the app's queues
    { input: { email: 'a@b' }, queue: 'elsewhere' },
  ]);
}

export function schedulesOfTypedQueues(): void {
  // A task definition of an app with typed queues, as scheduler.md shows it, and its name.
  app.schedule({
    name: 'welcome.digest',
    task: welcome,
    input: { email: 'digest@example.com' },
    pattern: { kind: 'daily', at: '08:00' },
  });
  app.schedule({
    name: 'welcome.by-name',
    task: 'emails.welcome',
    queue: 'emails',
    pattern: { kind: 'hourly', minute: 0 },
  });
  createApp({
    databaseUrl: 'postgres://unused@127.0.0.1/unused',
    queues: ['default', 'emails'],
    schedules: [
      { name: 'declared', task: welcome, queue: 'emails', pattern: { kind: 'interval', minutes: 5 } },
    ],
  });
  app.schedule({
    name: 'welcome.elsewhere',
    task: welcome,
    // @ts-expect-error queue: "elsewhere" is not one of the app's queues
    queue: 'elsewhere',
    pattern: { kind: 'daily', at: '08:00' },
  });
}

export function defaultQueueOnly(): void {
  const plain = createApp({ databaseUrl: 'postgres://unused@127.0.0.1/unused' });
  plain.task({ name: 'ok', queue: 'default', input: z.object({}), handler: () => 1 });
  // @ts-expect-error queue: an app without queues has only "default"
  plain.task({ name: 'no', queue: 'emails', input: z.object({}), handler: () => 1 });
  // Queue names only known at run time: any string compiles (and is checked at run time).
  const names: string[] = ['a', 'b'];
  createApp({ queues: names }).task({ name: 'dyn', queue: 'c', input: z.object({}), handler: () => 1 });
}

export async function declaredCodesNarrow(): Promise<void> {
  const result = await (await welcome.send({ email: 'a@b' })).result();
  if (result.ok) {
    const sent: boolean = result.value.sent;
    void sent;
    return;
  }
  const code: 'BAD_ADDRESS' | 'MAILBOX_FULL' | BuiltinErrorCode = result.error.code;
  void code;
  switch (result.error.code) {
    case 'BAD_ADDRESS':
    case 'MAILBOX_FULL':
    case 'WAIT_TIMEOUT':
    case 'TASK_NOT_FOUND':
      break;
    // @ts-expect-error code: "NOT_DECLARED" is neither declared nor built in
    case 'NOT_DECLARED':
      break;
  }
  // @ts-expect-error code: "NOT_DECLARED" is neither declared nor built in
  if (result.error.code === 'NOT_DECLARED') return;
}

export async function undeclaredTasksKeepStrings(): Promise<void> {
  const result: TaskResult<number> = await (await untyped.send({ n: 1 })).result();
  if (!result.ok && result.error.code === 'WHATEVER_ELSE') return;
}

export function undeclaredCodeInHandler(): void {
  app.task({
    name: 'y',
    input: z.object({}),
    errors: ['DECLARED_CODE'],
    // @ts-expect-error handler: returns a code not listed in errors
    handler: () => new TaskError('OTHER_CODE', 'not declared'),
  });
  app.task({
    name: 'z',
    input: z.object({}),
    errors: ['DECLARED_CODE'],
    // @ts-expect-error errorCodes: maps to a code not listed in errors
    errorCodes: [[RangeError, 'OTHER_CODE']],
    handler: () => 1,
  });
}

const approval = z.object({ approved: z.boolean(), by: z.string() });
const record = app.task({
  name: 'approvals.record',
  input: z.object({ approved: z.boolean(), by: z.string() }),
  handler: ({ by }) => by.length,
});

export async function signalPayloadsAreTyped(): Promise<void> {
  const wf = workflow(app, 'approvals');
  const wait = wf.waitFor('approval', { schema: approval, timeoutMs: 60_000 });
  const done = wf.node(record, { input: { approved: wait.result.approved, by: wait.result.by } });
  // @ts-expect-error signal: the payload's `by` is a string, not a boolean
  wf.node(record, { id: 'wrong', input: { approved: wait.result.by, by: wait.result.by } });
  const slept = wf.sleep({ ms: 1000, waitsFor: [done] });
  const handle: WorkflowHandle<number> = await wf.build({ output: done }).start();
  await handle.signal(wait, { approved: true, by: 'ann' });
  // @ts-expect-error signal: `approved` must be a boolean
  await handle.signal(wait, { approved: 'yes', by: 'ann' });
  // @ts-expect-error signal: a task node takes no signal
  await handle.signal(done, { approved: true, by: 'ann' });
  // @ts-expect-error signal: a sleep node takes no signal
  await handle.signal(slept, null);
}
