/**
 * The app module the fault run's worker processes load (`horsies worker scripts/faults/workerApp.ts`). Its
 * handlers record each execution (task id, attempt, process id, time) in `fault_executions`, on a connection of
 * their own straight to the server (never through the run's proxy or pooler), retried while the server is away.
 *
 * Environment: DATABASE_URL (the workers' way in: the proxy), HORSIES_SCHEMA, HORSIES_LISTEN_URL (optional),
 * FAULTS_RECORD_URL (the server itself), FAULTS_RECOVERY (recovery settings, JSON), FAULTS_PREPARED (`0` turns
 * prepared statements off, for PgBouncer in transaction mode), HORSIES_LOG_LEVEL.
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { pino } from 'pino';
import { isTransientDatabaseError } from '../../src/db/Database.js';
import { defineFaultApp } from './app.js';

const schema = process.env.HORSIES_SCHEMA ?? 'horsies';
const side = new pg.Pool({ connectionString: process.env.FAULTS_RECORD_URL, max: 4 });
side.on('error', () => undefined);

const defined = defineFaultApp(
  {
    logger: pino({ level: process.env.HORSIES_LOG_LEVEL ?? 'info' }),
    recovery: process.env.FAULTS_RECOVERY ? JSON.parse(process.env.FAULTS_RECOVERY) : undefined,
    preparedStatements: process.env.FAULTS_PREPARED !== '0',
  },
  async (ctx) => {
    // One id per execution: a retried insert whose first try did commit is not counted twice.
    const id = randomUUID();
    const startedMs = Date.now();
    for (;;) {
      try {
        await side.query(
          `INSERT INTO "${schema}".fault_executions (id, task_id, attempt, worker_pid, started_ms)
           VALUES ($1, $2, $3, $4, $5) ON CONFLICT (id) DO NOTHING`,
          [id, ctx.taskId, ctx.attempt, process.pid, startedMs],
        );
        return;
      } catch (error) {
        if (!isTransientDatabaseError(error) || ctx.signal.aborted) throw error;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
  },
);

export const app = defined.app;
