/** `horsies workflows list|show`, run as real processes against workflows run by an in-process worker. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { TaskError } from '../../src/errors.js';
import { createWorker } from '../../src/worker/Worker.js';
import { workflow } from '../../src/workflow/WorkflowDefinition.js';
import { runCli } from '../support/cli.js';
import type { CliResult } from '../support/cli.js';
import { databaseUrl, useTestSchema } from '../support/db.js';

const t = await useTestSchema();
const app = t.app();

function cli(...args: string[]): Promise<CliResult> {
  return runCli([...args, '--schema', t.schema], { DATABASE_URL: databaseUrl() });
}

const fetchPage = app.task({
  name: 'cli.wf.fetch',
  input: z.object({ url: z.string() }),
  handler: ({ url }) => ({ body: `words of ${url}` }),
});
const count = app.task({
  name: 'cli.wf.count',
  input: z.object({ text: z.string() }),
  handler: ({ text }) => text.split(' ').length,
});
const sum = app.task({
  name: 'cli.wf.sum',
  input: z.object({ values: z.array(z.number()) }),
  handler: ({ values }) => values.reduce((a, b) => a + b, 0),
});
const broken = app.task({
  name: 'cli.wf.broken',
  input: z.object({ code: z.string() }),
  handler: ({ code }): number => {
    throw new TaskError(code, `broke with ${code}`);
  },
});

let release: () => void = () => undefined;
const gate = app.task({
  name: 'cli.wf.gate',
  input: z.object({}),
  handler: () => new Promise<number>((resolve) => (release = () => resolve(1))),
});

const worker = createWorker(app, { concurrency: 4, pollIntervalMs: 200 });
beforeAll(() => worker.start());
afterAll(() => worker.stop());

const diamond = (() => {
  const wf = workflow(app, 'cli.diamond', { params: z.object({ url: z.string() }) });
  const page = wf.node(fetchPage, { input: { url: wf.params.url }, id: 'page' });
  const a = wf.node(count, { input: { text: page.result.body }, id: 'count-a' });
  const b = wf.node(count, { input: { text: 'one two three' }, waitsFor: [page], id: 'count-b' });
  const total = wf.node(sum, { input: { values: [a.result, b.result] }, id: 'total', join: 'all' });
  return wf.build({ output: total });
})();

const failing = (() => {
  const wf = workflow(app, 'cli.failing');
  const ok = wf.node(count, { input: { text: 'a b' }, id: 'ok' });
  const bad = wf.node(broken, { input: { code: 'CLI_BROKE' }, id: 'bad' });
  const after = wf.node(sum, { input: { values: [ok.result] }, waitsFor: [ok, bad], id: 'after' });
  const anyOf = wf.node(sum, {
    input: { values: [] },
    waitsFor: [ok, bad],
    join: { quorum: 1 },
    id: 'quorum',
  });
  void after;
  void anyOf;
  return wf.build();
})();

describe('horsies workflows show', () => {
  it('draws a finished workflow: its result and every node with its status, dependencies and join', async () => {
    const handle = await diamond.start({ url: 'x y' });
    expect(await handle.result({ timeoutMs: 10_000 })).toEqual({ ok: true, value: 7 });
    const run = await cli('workflows', 'show', handle.id);
    expect(run.code, run.stderr).toBe(0);
    const lines = run.stdout.split('\n');
    expect(run.stdout).toContain(`workflow  ${handle.id}`);
    expect(run.stdout).toContain('name      cli.diamond');
    expect(run.stdout).toContain('status    COMPLETED');
    expect(run.stdout).toContain('nodes     4/4 terminal');
    expect(run.stdout).toContain('result    7');
    expect(run.stdout).toContain('depth 0: 1 node: COMPLETED 1');
    expect(run.stdout).toContain('depth 1: 2 nodes: COMPLETED 2');
    expect(run.stdout).toContain('depth 2: 1 node: COMPLETED 1');
    expect(lines).toContainEqual(expect.stringMatching(/^ {2}page\s+cli\.wf\.fetch\s+COMPLETED$/));
    expect(lines).toContainEqual(
      expect.stringMatching(/^ {2}count-a\s+cli\.wf\.count\s+COMPLETED\s+page\s+all$/),
    );
    expect(lines).toContainEqual(
      expect.stringMatching(/^ {2}count-b\s+cli\.wf\.count\s+COMPLETED\s+page\s+all$/),
    );
    expect(lines).toContainEqual(
      expect.stringMatching(/^ {2}total\s+cli\.wf\.sum\s+COMPLETED\s+count-a, count-b\s+all$/),
    );
  });

  it("shows a failed workflow's error, the failed node and its cause, and the skipped node", async () => {
    const handle = await failing.start();
    expect((await handle.result({ timeoutMs: 10_000 })).ok).toBe(false);
    const run = await cli('workflows', 'show', handle.id);
    expect(run.code, run.stderr).toBe(0);
    const lines = run.stdout.split('\n');
    expect(run.stdout).toContain('status    FAILED');
    expect(run.stdout).toMatch(
      /error {5}WORKFLOW_FAILED: workflow "cli\.failing" failed: node "bad" ended FAILED/,
    );
    expect(run.stdout).toContain('  node    bad');
    expect(run.stdout).toContain('  cause   {"code":"CLI_BROKE","message":"broke with CLI_BROKE"}');
    expect(lines).toContainEqual(expect.stringMatching(/^ {2}bad\s+cli\.wf\.broken\s+FAILED \(CLI_BROKE\)$/));
    expect(lines).toContainEqual(
      expect.stringMatching(/^ {2}after\s+cli\.wf\.sum\s+SKIPPED \(UPSTREAM_SKIPPED\)\s+ok, bad\s+all$/),
    );
    expect(lines).toContainEqual(
      expect.stringMatching(/^ {2}quorum\s+cli\.wf\.sum\s+COMPLETED\s+ok, bad\s+quorum 1\/2$/),
    );
  });

  it('shows a node whose task runs as RUNNING (its row says ENQUEUED) and the nodes after it PENDING', async () => {
    const wf = workflow(app, 'cli.running');
    const held = wf.node(gate, { input: {}, id: 'held' });
    wf.node(sum, { input: { values: [held.result] }, id: 'next' });
    const handle = await wf.build().start();
    await expect
      .poll(async () => (await handle.nodes()).map((n) => n.status), { timeout: 10_000 })
      .toEqual(['RUNNING', 'PENDING']);
    const run = await cli('workflows', 'show', handle.id);
    release();
    expect(run.code, run.stderr).toBe(0);
    const lines = run.stdout.split('\n');
    expect(run.stdout).toContain('status    RUNNING');
    expect(run.stdout).toContain('nodes     0/2 terminal');
    expect(lines).toContainEqual(expect.stringMatching(/^ {2}held\s+cli\.wf\.gate\s+RUNNING$/));
    expect(lines).toContainEqual(expect.stringMatching(/^ {2}next\s+cli\.wf\.sum\s+PENDING\s+held\s+all$/));
    const [stored] = await t.query<{ status: string }>(
      'SELECT status FROM {{schema}}.horsies_workflow_tasks WHERE workflow_id = $1 AND node_id = $2',
      [handle.id, 'held'],
    );
    expect(stored!.status).toBe('ENQUEUED');
    expect(await handle.result({ timeoutMs: 10_000 })).toMatchObject({ ok: true });
  });

  it('prints the workflow and its nodes as JSON with --json', async () => {
    const handle = await diamond.start({ url: 'json' });
    await handle.result({ timeoutMs: 10_000 });
    const run = await cli('workflows', 'show', handle.id, '--json');
    expect(run.code, run.stderr).toBe(0);
    const shown = JSON.parse(run.stdout) as {
      id: string;
      status: string;
      result: unknown;
      nodes: { id: string; status: string; dependencies: number[] }[];
    };
    expect(shown).toMatchObject({ id: handle.id, status: 'COMPLETED', result: { ok: 6 } });
    expect(shown.nodes.map((n) => [n.id, n.status, n.dependencies])).toEqual([
      ['page', 'COMPLETED', []],
      ['count-a', 'COMPLETED', [0]],
      ['count-b', 'COMPLETED', [0]],
      ['total', 'COMPLETED', [1, 2]],
    ]);
  });

  it('exits 1 for an unknown id', async () => {
    const run = await cli('workflows', 'show', 'no-such-workflow');
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('horsies: no workflow with id no-such-workflow');
    expect(run.stdout).toBe('');
  });
});

describe('horsies workflows list', () => {
  it('lists runs newest first with node counts, filtered by status and name', async () => {
    const done = await diamond.start({ url: 'list' });
    const failed = await failing.start();
    await Promise.all([done.result({ timeoutMs: 10_000 }), failed.result({ timeoutMs: 10_000 })]);
    const all = await cli('workflows', 'list');
    expect(all.code, all.stderr).toBe(0);
    const lines = all.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^id\s+name\s+status\s+nodes\s+sent\s+completed\s+error$/);
    const at = (id: string): number => lines.findIndex((l) => l.startsWith(id));
    expect(at(failed.id)).toBeGreaterThan(1);
    expect(at(failed.id)).toBeLessThan(at(done.id));
    expect(lines[at(done.id)]).toMatch(/cli\.diamond\s+COMPLETED\s+4\/4\s/);
    expect(lines[at(failed.id)]).toMatch(/cli\.failing\s+FAILED\s+4\/4\s.*WORKFLOW_FAILED$/);

    const onlyFailed = await cli('workflows', 'list', '--status', 'failed', '--json');
    expect(onlyFailed.code, onlyFailed.stderr).toBe(0);
    const rows = onlyFailed.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { id: string; status: string; name: string; errorCode: string });
    expect(rows.map((r) => r.id)).toContain(failed.id);
    expect(rows.every((r) => r.status === 'FAILED' && r.errorCode === 'WORKFLOW_FAILED')).toBe(true);

    const byName = await cli('workflows', 'list', '--name', 'cli.diamond', '--json');
    const names = byName.stdout
      .trim()
      .split('\n')
      .map((l) => (JSON.parse(l) as { name: string }).name);
    expect(names.length).toBeGreaterThan(0);
    expect(new Set(names)).toEqual(new Set(['cli.diamond']));
  });

  it('pages with --limit and --before, each run once', async () => {
    const started = [];
    for (let i = 0; i < 3; i += 1) started.push(await diamond.start({ url: `page ${i}` }));
    await Promise.all(started.map((h) => h.result({ timeoutMs: 10_000 })));
    const ids: string[] = [];
    let before: string | undefined;
    for (let page = 0; page < 20; page += 1) {
      const args = ['workflows', 'list', '--name', 'cli.diamond', '--limit', '2', '--json'];
      const run = await cli(...args, ...(before ? ['--before', before] : []));
      expect(run.code, run.stderr).toBe(0);
      const got = run.stdout
        .trim()
        .split('\n')
        .filter(Boolean)
        .map((l) => (JSON.parse(l) as { id: string }).id);
      ids.push(...got);
      if (got.length < 2) break;
      before = got.at(-1);
    }
    expect(new Set(ids).size).toBe(ids.length);
    for (const h of started) expect(ids).toContain(h.id);
    // Newest first: the last started comes before the first started.
    expect(ids.indexOf(started[2]!.id)).toBeLessThan(ids.indexOf(started[0]!.id));
  });

  it('says so when nothing matches, and rejects an unknown status or --before id', async () => {
    const none = await cli('workflows', 'list', '--name', 'cli.nothing');
    expect(none.code, none.stderr).toBe(0);
    expect(none.stdout.trim()).toBe('no workflows match');
    const bad = await cli('workflows', 'list', '--status', 'bogus');
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toContain('unknown status BOGUS');
    expect(bad.stderr).toContain('PAUSED');
    const missing = await cli('workflows', 'list', '--before', 'nowhere');
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('horsies: no workflow with id nowhere');
  });
});
