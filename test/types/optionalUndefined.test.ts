/**
 * The public options take `undefined` for every optional key, in their types under `exactOptionalPropertyTypes`
 * (`optionalUndefined.ts` compiles with the flag on) and at run time: each constructor and operation, given
 * `undefined` for every optional key the compiler lists, behaves as if the key were left out.
 */
import { join, resolve } from 'node:path';
import ts from 'typescript';
import { afterAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  createDashboard,
  createScheduler,
  createWorker,
  declareSchedules,
  workflow,
} from '../../src/index.js';
import { useTestSchema } from '../support/db.js';

const ROOT = resolve(import.meta.dirname, '../..');
const FILE = join(ROOT, 'test/types/optionalUndefined.ts');

function program(): ts.Program {
  const config = ts.readConfigFile(join(ROOT, 'tsconfig.json'), (p) => ts.sys.readFile(p));
  const options = ts.parseJsonConfigFileContent(config.config, ts.sys, ROOT).options;
  return ts.createProgram([FILE, join(ROOT, 'src/db/pg-types.d.ts')], {
    ...options,
    noEmit: true,
    exactOptionalPropertyTypes: true,
  });
}

const compiled = program();

/** The optional keys of each member of `PublicOptions`, as the compiler sees them. */
function optionalKeys(): Record<string, string[]> {
  const checker = compiled.getTypeChecker();
  const file = compiled.getSourceFile(FILE) as ts.SourceFile;
  const declaration = file.statements.find(
    (s): s is ts.InterfaceDeclaration => ts.isInterfaceDeclaration(s) && s.name.text === 'PublicOptions',
  ) as ts.InterfaceDeclaration;
  const keys: Record<string, string[]> = {};
  for (const member of checker.getPropertiesOfType(checker.getTypeAtLocation(declaration))) {
    const type = checker.getTypeOfSymbolAtLocation(member, declaration);
    keys[member.name] = checker
      .getPropertiesOfType(type)
      .filter((p) => (p.flags & ts.SymbolFlags.Optional) !== 0)
      .map((p) => p.name);
  }
  return keys;
}

const keys = optionalKeys();

/** `undefined` for every optional key of the named option type (but those listed in `except`). */
function undefinedFor(name: string, except: string[] = []): Record<string, undefined> {
  const list = keys[name];
  if (!list || list.length === 0) throw new Error(`no optional keys for ${name}`);
  return Object.fromEntries(list.filter((k) => !except.includes(k)).map((k) => [k, undefined]));
}

describe('under exactOptionalPropertyTypes', () => {
  it('every optional key of every public option takes undefined', () => {
    const file = compiled.getSourceFile(FILE);
    const found = [...compiled.getSyntacticDiagnostics(file), ...compiled.getSemanticDiagnostics(file)];
    expect(found.map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'))).toEqual([]);
    expect(Object.keys(keys).length).toBeGreaterThanOrEqual(30);
  });
});

const t = await useTestSchema();

describe('at run time, undefined is a key left out', () => {
  const closing: Array<() => Promise<void>> = [];
  afterAll(async () => {
    for (const close of closing) await close();
  });

  it('app, queues, recovery, metrics, retry, tasks, workers, dashboards and schedulers', async () => {
    const base = t.app();
    const app = t.app({
      ...undefinedFor('AppConfig', ['schema', 'logger', 'databaseUrl']),
      queues: [{ name: 'default', ...undefinedFor('QueueConfig', ['name']) }],
      recovery: undefinedFor('RecoveryConfig'),
    });
    expect(app.config).toEqual(base.config);
    expect(t.app({ metrics: undefinedFor('MetricsConfig') }).metrics).not.toBeNull();

    const input = z.object({ n: z.number() });
    const plain = base.task({ name: 'plain', input, handler: ({ n }) => n });
    const spelled = app.task({
      name: 'plain',
      input,
      handler: ({ n }) => n,
      ...undefinedFor('TaskConfig', ['name', 'input', 'handler', 'retry']),
      retry: undefinedFor('RetryPolicy'),
    });
    expect(spelled.policies).toEqual(plain.policies);

    const { identity: _a, ...workerDefaults } = createWorker(base, {}).config;
    const { identity: _b, ...workerSpelled } = createWorker(app, {
      ...undefinedFor('WorkerConfig'),
      prefetch: undefinedFor('WorkerPrefetchConfig'),
      claims: undefinedFor('WorkerClaimsConfig'),
      outcomes: undefinedFor('WorkerOutcomesConfig'),
      shutdown: undefinedFor('WorkerShutdownConfig'),
    }).config;
    expect(workerSpelled).toEqual(workerDefaults);

    const dashboard = createDashboard(app, undefinedFor('DashboardOptions'));
    expect(dashboard.actionsEnabled).toBe(Boolean(process.env.HORSIES_DASHBOARD_TOKEN));
    closing.push(() => dashboard.close());

    app.schedule({
      name: 'every-minute',
      task: spelled,
      input: { n: 1 },
      pattern: { kind: 'interval', minutes: 1, ...undefinedFor('IntervalPattern', ['minutes']) },
      ...undefinedFor('ScheduleConfig', ['name', 'task', 'input', 'pattern']),
    });
    declareSchedules(
      [
        {
          name: 'hourly',
          task: spelled,
          input: { n: 1 },
          pattern: { kind: 'hourly', minute: 5, second: undefined },
        },
      ],
      undefinedFor('DeclareOptions'),
    );
    expect(createScheduler(app, undefinedFor('CreateSchedulerOptions')).checkIntervalMs).toBe(1000);
  });

  it('workflows, their nodes, starts and filters; sends; reads of tasks and their handles', async () => {
    const app = t.app();
    const double = app.task({
      name: 'double',
      input: z.object({ n: z.number() }),
      handler: ({ n }) => n * 2,
    });
    const wf = workflow(app, 'spelled', undefinedFor('WorkflowOptions'));
    const first = wf.node(double, { input: { n: 1 }, ...undefinedFor('NodeOptions', ['input']) });
    const second = wf.node(double, { input: { n: first.result }, ...undefinedFor('NodeOptions', ['input']) });
    const definition = wf.build({
      output: second,
      successPolicy: { cases: [[second]], ...undefinedFor('SuccessPolicy', ['cases']) },
    });
    const handle = await definition.start(undefined, undefinedFor('StartOptions'));
    expect(await app.listWorkflows(undefinedFor('WorkflowFilter'))).toContainEqual(
      expect.objectContaining({ id: handle.id }),
    );

    const sent = await double.send(
      { n: 2 },
      { ...undefinedFor('SendOptions'), ...undefinedFor('SendCallOptions') },
    );
    await double.sendMany([{ input: { n: 3 }, ...undefinedFor('SendManyItem', ['input']) }]);
    const deduped = await double.send(
      { n: 4 },
      { dedupe: { key: 'once', ...undefinedFor('DedupeOptions', ['key']) } },
    );
    expect((await double.send({ n: 4 }, { dedupe: { key: 'once' } })).id).toBe(deduped.id);
    expect(await app.getTask(sent.id, undefinedFor('GetTaskOptions'))).toMatchObject({ id: sent.id });
    expect(await sent.info(undefinedFor('InfoOptions'))).toMatchObject({ id: sent.id });
    const listed = await app.listTasks(undefinedFor('TaskFilter'), undefinedFor('ListTasksPage'));
    expect(listed.map((task) => task.id)).toContain(sent.id);
    expect(await app.resubmit({ status: 'FAILED', ...undefinedFor('ResubmitFilter', ['status']) })).toEqual({
      ids: [],
    });
    expect(await app.handle('no-such-task').result(undefinedFor('ResultOptions'))).toMatchObject({
      ok: false,
      error: { code: 'TASK_NOT_FOUND' },
    });
    expect(
      await app.getWorkflow('no-such-workflow').result(undefinedFor('WorkflowResultOptions')),
    ).toMatchObject({ ok: false, error: { code: 'WORKFLOW_NOT_FOUND' } });
  });
});
