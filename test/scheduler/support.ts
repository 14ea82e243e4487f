/** Shared pieces of the scheduler tests: a task that records which schedule sent it, and simulated time. */
import { z } from 'zod';
import type { App } from '../../src/client/App.js';
import type { ManualClock } from '../../src/clock.js';
import type { Scheduler, SchedulerResult } from '../../src/scheduler/Scheduler.js';
import type { TestSchema } from '../support/db.js';

/** Defines `tick` (input: the schedule's name) on `app`. */
export function defineTick(app: App) {
  return app.task({
    name: 'tick',
    input: z.object({ schedule: z.string() }),
    handler: () => 'ok',
  });
}

/**
 * Runs passes of `scheduler`, moving `clock` to each next run the scheduler reports, until the next run is after
 * `end`. Returns every pass's result.
 */
export async function simulateUntil(
  scheduler: Scheduler,
  clock: ManualClock,
  end: Date,
): Promise<SchedulerResult[]> {
  const results = [await scheduler.runOnce()];
  for (;;) {
    const next = results[results.length - 1]?.nextRunAt;
    if (!next || next > end) return results;
    clock.set(next);
    results.push(await scheduler.runOnce());
  }
}

/** The `sent_at` of every task a schedule sent, oldest first, as ISO strings. */
export async function sentSlots(t: TestSchema, schedule: string): Promise<string[]> {
  const rows = await t.query<{ sent_at: Date }>(
    `SELECT sent_at FROM {{schema}}.horsies_tasks WHERE kwargs->>'schedule' = $1 ORDER BY sent_at`,
    [schedule],
  );
  return rows.map((r) => r.sent_at.toISOString());
}

/** ISO instants for a list of `YYYY-MM-DDTHH:MM` UTC times. */
export function utc(...times: string[]): string[] {
  return times.map((time) => new Date(`${time}:00Z`).toISOString());
}
