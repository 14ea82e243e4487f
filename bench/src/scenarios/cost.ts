/**
 * What a drain costs per task, beside its rate: the store server's CPU, the harness process's CPU (the subject's
 * worker and its driver run in it), and for PostgreSQL the WAL written. The server's CPU is read from /proc for the
 * server the subject talks to (PostgreSQL's postmaster, or the harness's `redis-server`, and every process under
 * it, their exited children included; other servers on the machine do not count), so it is only measured when the
 * server runs on this machine: the embedded PostgreSQL and the harness's Redis, not a DATABASE_URL elsewhere.
 * The WAL is the server's insert position before and after (server-wide: one subject runs at a time, but the
 * checkpointer and autovacuum count too).
 */
import { postmasterPid, processTreeCpuMs } from '../../../scripts/processCpu.js';
import type { Subject } from '../peers/types.js';
import type { Column, RunContext } from './types.js';

/** The heading of the cost table beside the drain's rates. */
export const COST_TABLE =
  'Cost per task during the drain (µs of CPU of the store server and of the harness process, which runs the ' +
  'worker and its driver; WAL bytes written, PostgreSQL only): less moved by a busy machine than the rates, not free of it';

/** The store's cost columns of one case (`key`): its server's CPU and the WAL, in the table headed `table`. */
export function storeCostColumns(key: string, label: string, table = COST_TABLE): Column[] {
  return [
    { key: `server:${key}`, label: `server CPU, ${label}`, unit: 'µs', better: 'lower', table },
    { key: `wal:${key}`, label: `WAL, ${label}`, unit: 'bytes', better: 'lower', table },
  ];
}

/** The cost columns of one drain case (`key`, its task count): the store's and the harness process's. */
export function costColumns(key: string, label: string): Column[] {
  const [server, wal] = storeCostColumns(key, label);
  return [
    server!,
    { key: `harness:${key}`, label: `harness CPU, ${label}`, unit: 'µs', better: 'lower', table: COST_TABLE },
    wal!,
  ];
}

/** A running measurement; `stop` gives the cost per task of what happened since it began. */
export interface CostMeter {
  stop(tasks: number, key: string): Promise<Record<string, number>>;
}

/** Starts measuring what `subject`'s drain costs. */
export async function startCostMeter(subject: Subject, ctx: RunContext): Promise<CostMeter> {
  const local = subject.store === 'redis' ? ctx.env.redis !== null : ctx.env.postgres.source === 'embedded';
  const serverPid = !local
    ? null
    : subject.store === 'redis'
      ? (ctx.env.redis?.pid ?? null)
      : postmasterPid(
          (await ctx.env.postgres.admin.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!
            .pid,
        );
  const walPosition = async (): Promise<string | null> => {
    if (subject.store !== 'postgres') return null;
    const { rows } = await ctx.env.postgres.admin.query<{ lsn: string }>(
      'SELECT pg_current_wal_insert_lsn()::text AS lsn',
    );
    return rows[0]!.lsn;
  };
  const wal0 = await walPosition();
  const server0 = processTreeCpuMs(serverPid);
  const harness0 = process.cpuUsage();
  return {
    async stop(tasks, key) {
      const harness = process.cpuUsage(harness0);
      const values: Record<string, number> = {
        [`harness:${key}`]: (harness.user + harness.system) / tasks,
      };
      if (serverPid !== null)
        values[`server:${key}`] = ((processTreeCpuMs(serverPid) - server0) * 1000) / tasks;
      if (wal0 !== null) {
        const { rows } = await ctx.env.postgres.admin.query<{ bytes: string }>(
          'SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), $1)::text AS bytes',
          [wal0],
        );
        values[`wal:${key}`] = Number(rows[0]!.bytes) / tasks;
      }
      return values;
    },
  };
}
