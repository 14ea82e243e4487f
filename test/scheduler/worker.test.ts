/** The maintenance leader of the workers runs the app's schedules, and the app offers their operations. */
import { afterAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ConfigError, HorsiesError } from '../../src/errors.js';
import { createWorker } from '../../src/worker/Worker.js';
import { rejection, thrown } from '../support/assertions.js';
import { eventually, useTestSchema, waitForEvent } from '../support/db.js';

const t = await useTestSchema();

describe('schedules of the app', () => {
  const app = t.app({ recovery: { checkIntervalMs: 60_000 } });
  const tick = app.task({
    name: 'tick',
    input: z.object({ label: z.string() }),
    handler: ({ label }) => label,
  });
  app.schedule({
    name: 'every-second',
    task: tick,
    input: { label: 'each' },
    pattern: { kind: 'interval', seconds: 1 },
  });
  const worker = createWorker(app, { concurrency: 2 });
  afterAll(() => worker.stop());

  it('are checked when declared: a bad one throws and leaves the others', () => {
    const error = thrown(
      () =>
        app.schedule({
          name: 'every-second',
          task: tick,
          input: { label: 3 },
          pattern: { kind: 'interval' },
        }),
      ConfigError,
    );
    expect(error.problems.length).toBeGreaterThanOrEqual(2);
    expect(app.schedules.map((s) => s.name)).toEqual(['every-second']);
  });

  it("are sent by the leader on the schedule's own timer, not the 60 s maintenance interval", async () => {
    const elected = waitForEvent(worker, 'leader:elected');
    await worker.start();
    await elected;
    const rows = await eventually(async () => {
      const sent = await t.query<{ id: string; sent_at: Date; status: string }>(
        "SELECT id, sent_at, status FROM {{schema}}.horsies_tasks WHERE task_name = 'tick' ORDER BY sent_at",
      );
      return sent.length >= 2 && sent.every((r) => r.status === 'COMPLETED') && sent;
    }, 15_000);
    // Each task stands for one slot: sent_at on a whole second, one task per slot.
    for (const row of rows) expect(row.sent_at.getMilliseconds()).toBe(0);
    expect(new Set(rows.map((r) => r.sent_at.getTime())).size).toBe(rows.length);
  });

  it('can be listed, triggered, paused and resumed through the app', async () => {
    const [info] = await app.listSchedules();
    expect(info).toMatchObject({ name: 'every-second', declared: true, orphaned: false, paused: false });
    const { taskId } = await app.triggerSchedule('every-second');
    expect(await app.handle(taskId).result({ timeoutMs: 10_000 })).toEqual({ ok: true, value: 'each' });
    await app.pauseSchedule('every-second');
    expect((await app.listSchedules())[0]?.paused).toBe(true);
    await app.resumeSchedule('every-second');
    expect((await app.listSchedules())[0]?.paused).toBe(false);
    const missing = await rejection(app.triggerSchedule('nope'), HorsiesError);
    expect(missing.code).toBe('SCHEDULE_NOT_FOUND');
  });
});
