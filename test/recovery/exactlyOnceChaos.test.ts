/**
 * A short fault run of the transactional finish (the full one, 200 SIGKILLs, is `scripts/fault-tx-finish.ts`):
 * worker processes killed at random and one immediate PostgreSQL restart while each handler writes one row through
 * `ctx.transaction`. Every COMPLETED task has exactly one row, written by its completing attempt; no other task has
 * any; nothing completes twice or stays open.
 */
import { expect, it } from 'vitest';
import { runFaultRun } from '../support/exactlyOnceFaults.js';

it("writes each completed task's effect exactly once under SIGKILLs and a PostgreSQL restart", async () => {
  const seed = Number(process.env.HORSIES_CHAOS_SEED ?? Date.now() % 1_000_000);
  const summary = await runFaultRun({
    kills: 6,
    workers: 3,
    restartAfterKills: 3,
    minUptimeMs: 500,
    batch: 100,
    seed,
  });
  console.log(`transactional finish fault run: ${JSON.stringify(summary)}`);
  expect(summary.kills).toBe(6);
  expect(summary.serverRestarts).toBe(1);
  expect(summary.open).toBe(0);
  expect(summary.completed).toBe(summary.tasks);
  // Kills landed on running handlers: the reaper wrote some runs off, and they ran again.
  expect(summary.crashedAttempts).toBeGreaterThan(0);
  expect(summary.violations).toEqual({
    completedWithoutOneEffect: 0,
    effectsOfUncompleted: 0,
    effectsOfAnotherAttempt: 0,
    completedTwice: 0,
  });
}, 180_000);
