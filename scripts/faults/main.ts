/**
 * `npm run faults`: one fault run (see harness.ts), its invariants and figures printed; exit code 1 when an
 * invariant fails, 2 on an error of the run itself. Ctrl-C (or SIGTERM) stops the schedule and every child; the
 * invariants are checked when the server is still up (a terminal's Ctrl-C stops it too: exit code 130).
 *
 *   npm run faults -- [--short | --long] [--seed N] [--workers N] [--tasks N] [--workflows N] [--kills N]
 *                     [--restarts N] [--net-faults N] [--listen-drops N] [--duration S] [--pgbouncer]
 *                     [--throughput high] [--json]
 *
 * The default is the short mode; `--long` reaches 1,000 kills and 12 PostgreSQL restarts. Any option given
 * overrides the mode's value.
 */
import { parseArgs } from 'node:util';
import { LONG_MODE, SHORT_MODE, formatReport, runFaults } from './harness.js';
import type { FaultOptions } from './harness.js';

const { values } = parseArgs({
  options: {
    short: { type: 'boolean', default: false },
    long: { type: 'boolean', default: false },
    seed: { type: 'string' },
    workers: { type: 'string' },
    concurrency: { type: 'string' },
    tasks: { type: 'string' },
    workflows: { type: 'string' },
    kills: { type: 'string' },
    restarts: { type: 'string' },
    'net-faults': { type: 'string' },
    'listen-drops': { type: 'string' },
    duration: { type: 'string' },
    'max-minutes': { type: 'string' },
    pgbouncer: { type: 'boolean', default: false },
    throughput: { type: 'string' },
    json: { type: 'boolean', default: false },
  },
});

const count = (name: string, raw: string | undefined): number | undefined => {
  if (raw === undefined) return undefined;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0) {
    console.error(`--${name} must be a whole number, got ${JSON.stringify(raw)}`);
    process.exit(2);
  }
  return n;
};

const mode = values.long ? LONG_MODE : SHORT_MODE;
const seed = count('seed', values.seed) ?? Math.floor(Math.random() * 1_000_000);
const duration = count('duration', values.duration);
const maxMinutes = count('max-minutes', values['max-minutes']);
const options: FaultOptions = {
  ...mode,
  seed,
  workers: count('workers', values.workers) ?? mode.workers,
  concurrency: count('concurrency', values.concurrency) ?? mode.concurrency,
  tasks: count('tasks', values.tasks) ?? mode.tasks,
  workflows: count('workflows', values.workflows) ?? mode.workflows,
  kills: count('kills', values.kills) ?? mode.kills,
  restarts: count('restarts', values.restarts) ?? mode.restarts,
  netFaults: count('net-faults', values['net-faults']) ?? mode.netFaults,
  listenDrops: count('listen-drops', values['listen-drops']) ?? mode.listenDrops,
  durationMs: duration !== undefined ? duration * 1000 : mode.durationMs,
  maxMs: maxMinutes !== undefined ? maxMinutes * 60_000 : mode.maxMs,
  pgbouncer: values.pgbouncer,
  throughput: values.throughput === 'high' ? 'high' : 'default',
  log: (line) => console.log(`[${new Date().toISOString().slice(11, 19)}] ${line}`),
};
if (values.throughput !== undefined && values.throughput !== 'high' && values.throughput !== 'default') {
  console.error(`--throughput must be default or high, got ${JSON.stringify(values.throughput)}`);
  process.exit(2);
}
if (options.workers < 1) {
  console.error('--workers must be at least 1');
  process.exit(2);
}
console.log(`seed ${seed} (replay with --seed ${seed})`);

const controller = new AbortController();
let interrupts = 0;
process.on('SIGINT', () => {
  interrupts += 1;
  if (interrupts > 1) process.exit(130);
  console.log(
    'interrupted: stopping the schedule, checking, then stopping every process (Ctrl-C again to quit now)',
  );
  controller.abort();
});
process.on('SIGTERM', () => controller.abort());

try {
  const report = await runFaults({ ...options, signal: controller.signal });
  console.log(formatReport(report));
  if (values.json) console.log(JSON.stringify(report, null, 2));
  process.exit(report.ok ? 0 : 1);
} catch (error) {
  if (controller.signal.aborted) {
    console.error(error instanceof Error ? error.message : error);
    process.exit(130);
  }
  console.error('the fault run itself failed:', error);
  process.exit(2);
}
