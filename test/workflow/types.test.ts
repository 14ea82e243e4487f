/**
 * Type tests of the workflow wiring. `npm test` type-checks this file (`tsc --noEmit` over test/): each
 * `@ts-expect-error` below marks a wiring that must not compile, and tsc fails the run if one of them compiles
 * (an unused `@ts-expect-error` is an error). The test bodies also build the right wirings, so they are checked
 * to compile and to validate at run time.
 */
import { describe, expect, expectTypeOf, it } from 'vitest';
import { z } from 'zod';
import { createApp } from '../../src/client/App.js';
import type { TaskResult } from '../../src/errors.js';
import { workflow } from '../../src/workflow/WorkflowDefinition.js';
import type { TerminalResults, WorkflowDefinition } from '../../src/workflow/WorkflowDefinition.js';
import type { WorkflowHandle } from '../../src/workflow/WorkflowHandle.js';

// No database is touched: definitions are built, never started.
const app = createApp({ databaseUrl: 'postgres://unused', schema: 'types_only' });
const fetchPage = app.task({
  name: 'types.fetch',
  input: z.object({ url: z.string() }),
  handler: ({ url }) => ({ body: url, status: 200, tags: ['a'] }),
});
const countWords = app.task({
  name: 'types.count',
  input: z.object({ text: z.string(), minLength: z.number().optional() }),
  handler: ({ text }) => text.split(' ').length,
});
const square = app.task({
  name: 'types.square',
  input: z.object({ n: z.number() }),
  handler: ({ n }) => n * n,
});
const summarize = app.task({
  name: 'types.summarize',
  input: z.object({ counts: z.array(z.number()), page: z.object({ body: z.string(), status: z.number() }) }),
  handler: ({ counts }) => ({ total: counts.length }),
});

describe('typed wiring', () => {
  it('accepts a field of the right type, nested arrays and objects of references, and parameters', () => {
    const wf = workflow(app, 'types.ok', { params: z.object({ url: z.string(), n: z.number() }) });
    const page = wf.node(fetchPage, { input: { url: wf.params.url } });
    const words = wf.node(countWords, { input: { text: page.result.body } });
    const sq = wf.node(square, { input: { n: wf.params.n } });
    const summary = wf.node(summarize, {
      input: { counts: [words.result, sq.result, 3], page: page.result },
    });
    const def = wf.build({ output: summary });
    expectTypeOf(def).toEqualTypeOf<WorkflowDefinition<{ url: string; n: number }, { total: number }>>();
    expect(def.name).toBe('types.ok');
  });

  it('refuses a reference of the wrong type', () => {
    const wf = workflow(app, 'types.wrong');
    const page = wf.node(fetchPage, { input: { url: 'x' } });
    // @ts-expect-error `status` is a number; `text` wants a string.
    wf.node(countWords, { input: { text: page.result.status } });
    // @ts-expect-error `body` is a string; `n` wants a number.
    wf.node(square, { input: { n: page.result.body } });
    // @ts-expect-error a whole result object where a string is wanted.
    wf.node(countWords, { input: { text: page.result } });
    // @ts-expect-error an array of strings where numbers are wanted.
    wf.node(summarize, { input: { counts: page.result.tags, page: page.result } });
    // @ts-expect-error `nope` is no field of the result.
    wf.node(countWords, { input: { text: page.result.nope } });
  });

  it('refuses a missing required field and a static value of the wrong type', () => {
    const wf = workflow(app, 'types.missing');
    const page = wf.node(fetchPage, { input: { url: 'x' } });
    // @ts-expect-error `text` is required.
    wf.node(countWords, { input: { minLength: 3 } });
    // @ts-expect-error `page` is required.
    wf.node(summarize, { input: { counts: [1] } });
    // @ts-expect-error a static number where a string is wanted.
    wf.node(fetchPage, { input: { url: 42 } });
    // An optional field may be left out or wired.
    wf.node(countWords, { input: { text: page.result.body } });
  });

  it('types the result by the output node, or the terminal map without one', () => {
    const wf = workflow(app, 'types.output');
    const page = wf.node(fetchPage, { input: { url: 'x' } });
    const words = wf.node(countWords, { input: { text: page.result.body } });
    const def = wf.build({ output: words });
    // @ts-expect-error the output node's result is a number, not a string.
    const wrong: WorkflowDefinition<undefined, string> = def;
    void wrong;
    type Result = Awaited<ReturnType<WorkflowHandle<number>['result']>>;
    expectTypeOf<Result>().toEqualTypeOf<TaskResult<number>>();
    // @ts-expect-error a handle of the workflow yields numbers, not strings.
    const stringResult: (h: WorkflowHandle<number>) => Promise<TaskResult<string>> = (h) => h.result();
    void stringResult;
    const wf2 = workflow(app, 'types.terminal');
    wf2.node(fetchPage, { input: { url: 'x' } });
    expectTypeOf(wf2.build()).toEqualTypeOf<WorkflowDefinition<undefined, TerminalResults>>();
  });

  it('types a node outcome as a TaskResult, and start parameters by the schema', () => {
    const wf = workflow(app, 'types.params', { params: z.object({ url: z.string() }) });
    const page = wf.node(fetchPage, { input: { url: wf.params.url } });
    const def = wf.build({ output: page });
    expectTypeOf(page.outcome).not.toBeAny();
    // @ts-expect-error the parameters need a url.
    void (() => def.start({}));
    // @ts-expect-error a url must be a string.
    void (() => def.start({ url: 1 }));
    void (() => def.start({ url: 'https://example.com' }));
  });
});
