/**
 * The fault run of the transactional finish (see test/support/exactlyOnceFaults.ts): worker processes SIGKILLed at
 * random, 200 times by default, and one immediate PostgreSQL restart, while each handler writes one row through
 * `ctx.transaction`. Prints what it found and exits 1 on any violation (a COMPLETED task without exactly one row, a
 * row of a task that did not complete, a row of another attempt, a task completed twice, a task left open).
 *
 *   npx tsx scripts/fault-tx-finish.ts [--kills 200] [--workers 4] [--seed N]
 */
import { parseArgs } from 'node:util';
import { runFaultRun } from '../test/support/exactlyOnceFaults.js';

const { values } = parseArgs({
  options: {
    kills: { type: 'string', default: '200' },
    workers: { type: 'string', default: '4' },
    seed: { type: 'string' },
  },
});
const seed = Number(values.seed ?? Date.now() % 1_000_000);
const summary = await runFaultRun({
  kills: Number(values.kills),
  workers: Number(values.workers),
  seed,
  log: (line) => console.log(line),
});
console.log(JSON.stringify(summary, null, 2));
const bad = Object.values(summary.violations).reduce((a, b) => a + b, 0) + summary.open;
console.log(
  `fault run (seed ${seed}): ${summary.kills} SIGKILLs and ${summary.serverRestarts} PostgreSQL restart over ` +
    `${summary.chaosMs} ms, drained in ${summary.drainMs} ms; ${summary.tasks} tasks, ${summary.completed} COMPLETED, ` +
    `${summary.failed} FAILED; ${summary.crashedAttempts} runs written off; ${summary.ranToEndTwice} tasks ran to ` +
    `their end more than once; violations: ${bad}`,
);
process.exit(bad === 0 ? 0 : 1);
