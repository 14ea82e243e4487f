/**
 * The rolling upgrade from 0.1.0, with real processes of both releases: 0.1.0 (built from its commit) migrates a
 * fresh schema and runs two workers under a steady send rate; this checkout's migrator applies its migrations and
 * routine files while they run; a 0.1.0 worker started after that refuses the schema; two workers of this
 * checkout join and its client sends too; the 0.1.0 workers stop gracefully; the sends stop and the rest drains.
 * Every task sent must complete exactly once: one row, one attempt, one run, the right result, none left behind.
 * docs/upgrading.md states what this shows. The test takes about 15 s on an idle 2-core machine and 35 s at a load
 * average of 8 (five processes start; each phase waits for 40 runs), after 3 to 7 s building 0.1.0.
 */
import { setTimeout as pause } from 'node:timers/promises';
import { afterAll, describe, expect, it } from 'vitest';
import * as current from '../../src/index.js';
import { latestMigrationVersion, routineNames } from '../../src/db/schemaVersion.js';
import { defineUpgradeApp } from '../fixtures/upgradeTasks.js';
import type { Library } from '../fixtures/upgradeTasks.js';
import { eventually, testLogger, useTestSchema } from '../support/db.js';
import { buildPreviousRelease, PREVIOUS_RELEASE } from '../support/previousRelease.js';
import { startWorkerProcess } from '../support/processes.js';
import type { WorkerProcess } from '../support/processes.js';

const OLD = PREVIOUS_RELEASE.version;
const build = buildPreviousRelease();
afterAll(() => build.remove());

const t = await useTestSchema({ unmigrated: true });
const oldLib = (await import(build.lib)) as Library;
const appOptions = { logger: testLogger, databaseUrl: t.url, schema: t.schema };
const oldApp = defineUpgradeApp(oldLib, { release: OLD, ...appOptions });
const newApp = defineUpgradeApp(current, { release: 'current', ...appOptions });
const senders: { stop(): Promise<void> }[] = [];
afterAll(async () => {
  // A failed test leaves its senders running: stop them before their apps close.
  await Promise.all(senders.map((s) => s.stop()));
  await Promise.all([oldApp.close(), newApp.close()]);
});

function startWorker(release: 'old' | 'current'): WorkerProcess {
  return startWorkerProcess(
    {
      databaseUrl: t.url,
      schema: t.schema,
      module: 'test/fixtures/upgradeApp.ts',
      ...(release === 'old'
        ? { cli: build.cli, variables: { HORSIES_UPGRADE_LIB: build.lib, HORSIES_UPGRADE_RELEASE: OLD } }
        : {}),
    },
    ['--concurrency', '4'],
  );
}

/**
 * Sends one task about every `everyMs` (alternating the plain and the capped task, each sleeping 0 to 30 ms) until
 * stopped: an open-loop producer, which keeps sending whatever the workers do. A failed send is kept, not thrown.
 */
function sendSteadily(app: typeof oldApp, everyMs: number) {
  const ids: string[] = [];
  const errors: unknown[] = [];
  let stopped = false;
  const loop = (async () => {
    for (let n = 0; !stopped; n += 1) {
      const task = n % 2 === 0 ? app.plain : app.capped;
      try {
        ids.push((await task.send({ n, ms: (n % 4) * 10 })).id);
      } catch (error) {
        errors.push(error);
      }
      await pause(everyMs);
    }
  })();
  const sender = {
    ids,
    errors,
    stop: async (): Promise<void> => {
      stopped = true;
      await loop;
    },
  };
  senders.push(sender);
  return sender;
}

/** Resolves once workers of `release` have run at least `count` of `ids` (polled, with a deadline). */
async function runsAtLeast(release: string, ids: () => string[], count: number): Promise<number> {
  return eventually(async () => {
    const [row] = await t.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM {{schema}}.test_runs WHERE release = $1 AND task_id = ANY ($2::text[])',
      [release, ids()],
    );
    return (row?.n ?? 0) >= count && (row?.n as number);
  }, 30_000);
}

/**
 * Log lines of a worker process at level warn or above (pino: 40, 50, 60): a claim lost, a failed election or
 * statement would say so here.
 */
function complaints(worker: WorkerProcess): string[] {
  return worker
    .output()
    .split('\n')
    .filter((line) => /"level":(40|50|60)/.test(line));
}

describe(`the rolling upgrade from ${OLD}`, () => {
  it(`${OLD} workers keep working while the new migrations apply and new workers join: every task completes once`, async () => {
    const oldMigrate = await oldApp.app.migrate();
    expect(oldMigrate.version).toBe(PREVIOUS_RELEASE.migration);
    await t.query(
      'CREATE TABLE {{schema}}.test_runs (task_id text NOT NULL, release text NOT NULL, pid int NOT NULL)',
    );

    // Phase 1: the old release alone.
    const oldWorkers = [startWorker('old'), startWorker('old')];
    await Promise.all(oldWorkers.map((w) => w.ready));
    const oldSender = sendSteadily(oldApp, 20);
    await runsAtLeast(OLD, () => oldSender.ids, 40);

    // Phase 2: the new migrations and routines apply while the old workers claim, run and finish. Three longer
    // tasks are running in them as it applies: claimed and started through 0.1.0's routines, finished (after the
    // migrate committed, checked below) through the new ones.
    const held = await Promise.all([
      oldApp.plain.send({ n: -1, ms: 3_000 }),
      oldApp.plain.send({ n: -2, ms: 3_000 }),
      oldApp.capped.send({ n: -3, ms: 3_000 }),
    ]);
    const heldIds = held.map((h) => h.id);
    await eventually(async () => (await t.statusCounts(heldIds)).RUNNING === heldIds.length);
    const sentBeforeMigrate = oldSender.ids.length;
    const migrateStarted = Date.now();
    const newMigrate = await newApp.app.migrate();
    const migrateMs = Date.now() - migrateStarted;
    const [{ migratedAt } = { migratedAt: new Date(0) }] = await t.query<{ migratedAt: Date }>(
      'SELECT now() AS "migratedAt"',
    );
    // Every migration after the release's, in order.
    const after = latestMigrationVersion() - PREVIOUS_RELEASE.migration;
    expect(newMigrate.applied).toEqual(
      Array.from({ length: after }, (_, i) => PREVIOUS_RELEASE.migration + 1 + i),
    );
    expect([...newMigrate.routines].sort()).toEqual(routineNames().sort());
    const sentAfterMigrate = (): string[] => oldSender.ids.slice(sentBeforeMigrate);
    // The old workers keep working: tasks sent after the migration committed are claimed and finished by them.
    const oldRunsAfterMigrate = await runsAtLeast(OLD, sentAfterMigrate, 40);

    // An old worker started now refuses the schema, newer than it knows.
    const late = startWorker('old');
    expect(await late.exited).toBe(1);
    expect(late.output()).toContain(
      `is at migration version ${latestMigrationVersion()}, newer than this library's ` +
        `${PREVIOUS_RELEASE.migration}: upgrade horsies`,
    );

    // Phase 3: new workers join, and the new client sends too.
    const newWorkers = [startWorker('current'), startWorker('current')];
    await Promise.all(newWorkers.map((w) => w.ready));
    const newSender = sendSteadily(newApp, 20);
    await runsAtLeast('current', () => [...oldSender.ids, ...newSender.ids], 40);

    // Phase 4: the old workers stop gracefully (handing back what they claimed) while the sends go on.
    await Promise.all(
      oldWorkers.map(async (w) => {
        w.child.kill('SIGTERM');
        expect(await w.exited).toBe(0);
      }),
    );
    const sentWhenOldStopped = new Set([...oldSender.ids, ...newSender.ids]);
    await runsAtLeast(
      'current',
      () => [...oldSender.ids, ...newSender.ids].filter((id) => !sentWhenOldStopped.has(id)),
      40,
    );

    // Phase 5: the sends stop; what is left drains.
    await Promise.all([oldSender.stop(), newSender.stop()]);
    expect(oldSender.errors).toEqual([]);
    expect(newSender.errors).toEqual([]);
    const ids = [...oldSender.ids, ...newSender.ids, ...heldIds];
    expect(new Set(ids).size).toBe(ids.length);
    await eventually(async () => (await t.statusCounts(ids)).COMPLETED === ids.length, 60_000);

    // Every task sent is one row, COMPLETED, with one attempt (COMPLETED), one run and its result.
    const rows = await t.query<{
      id: string;
      status: string;
      result_ok: boolean;
      attempts: number;
      completed_attempts: number;
      runs: number;
    }>(
      `SELECT t.id, t.status, t.result = jsonb_build_object('ok', (t.kwargs->>'n')::int * 2) AS result_ok,
         (SELECT count(*)::int FROM {{schema}}.horsies_task_attempts a WHERE a.task_id = t.id) AS attempts,
         (SELECT count(*)::int FROM {{schema}}.horsies_task_attempts a
          WHERE a.task_id = t.id AND a.outcome = 'COMPLETED') AS completed_attempts,
         (SELECT count(*)::int FROM {{schema}}.test_runs r WHERE r.task_id = t.id) AS runs
       FROM {{schema}}.horsies_tasks t`,
    );
    expect(rows.map((r) => r.id).sort()).toEqual([...ids].sort());
    const wrong = rows.filter(
      (r) =>
        r.status !== 'COMPLETED' ||
        !r.result_ok ||
        r.attempts !== 1 ||
        r.completed_attempts !== 1 ||
        r.runs !== 1,
    );
    expect(wrong).toEqual([]);
    const heldRuns = await t.query<{ release: string; finished_after_migrate: boolean }>(
      `SELECT r.release, t.finished_at > $2 AS finished_after_migrate
       FROM {{schema}}.test_runs r JOIN {{schema}}.horsies_tasks t ON t.id = r.task_id
       WHERE r.task_id = ANY ($1::text[])`,
      [heldIds, migratedAt],
    );
    expect(heldRuns).toEqual(heldIds.map(() => ({ release: OLD, finished_after_migrate: true })));

    await Promise.all(
      newWorkers.map(async (w) => {
        w.child.kill('SIGTERM');
        expect(await w.exited).toBe(0);
      }),
    );
    for (const w of [...oldWorkers, ...newWorkers]) expect(complaints(w)).toEqual([]);

    const byRelease = await t.query<{ release: string; n: number }>(
      'SELECT release, count(*)::int AS n FROM {{schema}}.test_runs GROUP BY release ORDER BY release',
    );
    console.log(
      `rolling upgrade: ${OLD} built in ${build.buildMs} ms; new migrate (migration ` +
        `${newMigrate.applied.join(', ')}, ${newMigrate.routines.length} routines) took ${migrateMs} ms under load; ` +
        `${ids.length} tasks sent (${oldSender.ids.length} by the ${OLD} client, ${newSender.ids.length} by the new), ` +
        `runs by release ${byRelease.map((r) => `${r.release}: ${r.n}`).join(', ')}; ` +
        `${OLD} workers ran ${oldRunsAfterMigrate} of the tasks sent after the migrate before new workers joined`,
    );
  }, 180_000);
});
