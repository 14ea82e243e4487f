/**
 * The fault suite's short mode (scripts/faults/harness.ts; `npm run faults` runs it by hand, `--long` at scale):
 * worker processes SIGKILLed and replaced, PostgreSQL crash-restarted, connections cut, stalled and slowed by a
 * proxy, LISTEN connections terminated, while tasks and workflows drain. Every invariant must hold. The seed is
 * printed with the report; HORSIES_FAULT_SEED replays one.
 */
import { describe, expect, it } from 'vitest';
import { SHORT_MODE, formatReport, runFaults } from '../../scripts/faults/harness.js';

describe('the fault suite, short mode', () => {
  // At the defaults, and at throughput 'high': tasks started ahead of the free slots, and single sends handed to
  // idle workers (the report counts those).
  for (const throughput of ['default', 'high'] as const) {
    it(
      `loses nothing, completes nothing twice and explains every re-execution (throughput ${throughput})`,
      { timeout: 170_000 },
      async () => {
        const seed = Number(process.env.HORSIES_FAULT_SEED ?? Math.floor(Math.random() * 1_000_000));
        const report = await runFaults({ ...SHORT_MODE, seed, throughput });
        console.log(formatReport(report));
        expect(report.faults.kill).toBe(SHORT_MODE.kills);
        expect(report.faults.restart).toBe(SHORT_MODE.restarts);
        expect(report.faults.cut + report.faults.stall + report.faults.latency).toBe(SHORT_MODE.netFaults);
        expect(report.tasks).toBeGreaterThan(0);
        expect(report.workflows).toBe(SHORT_MODE.workflows);
        expect(report.invariants.filter((i) => !i.ok)).toEqual([]);
      },
    );
  }
});
