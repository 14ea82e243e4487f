/**
 * Claim contention: while a timed part runs, one connection of its own samples `pg_stat_activity` every 50 ms
 * for the backends of the bench database (every client backend but the harness's own, named
 * ADMIN_APPLICATION_NAME), with their state and wait event, and counts the ungranted locks of those backends in
 * `pg_locks`. Only one subject runs at a time, so those backends are the subject's (its workers, in this process
 * or in children, and its idle session connections).
 */
import pg from 'pg';
import { ADMIN_APPLICATION_NAME } from '../env/postgres.js';
import type { PostgresEnv } from '../env/postgres.js';
import { errorMessage, sleep } from '../time.js';

export const CONTENTION_INTERVAL_MS = 50;

/** The heading of the lock-wait table beside a scenario's rates. */
export const LOCK_TABLE =
  'Lock waits during the timed part (% of the active backends sampled; Lock = heavyweight: row, tuple, ' +
  'transaction, object; LWLock = lightweight: buffers, WAL insertion and writing, lock tables)';

/** The figures a scenario's sample reports from a summary, keyed with `suffix`. */
export function lockValues(summary: ContentionSummary, suffix = ''): Record<string, number> {
  const values: Record<string, number> = {};
  if (summary.heavyweightPercent !== null) values[`lock${suffix}`] = summary.heavyweightPercent;
  if (summary.lightweightPercent !== null) values[`lwlock${suffix}`] = summary.lightweightPercent;
  return values;
}

export interface ContentionSummary {
  /** Samples taken. */
  samples: number;
  /** Backend-samples in state `active` (running a statement), summed over the samples. */
  activeBackendSamples: number;
  /** Of those, how many waited on a heavyweight lock (`Lock`) or a lightweight lock (`LWLock`). */
  lockWaits: number;
  lwlockWaits: number;
  /** Share of active backend-samples waiting on `Lock` or `LWLock`, in percent; null when none was active. */
  lockWaitPercent: number | null;
  /** Mean number of active backends per sample. */
  meanActive: number;
  /** Samples in which some backend had an ungranted lock in pg_locks, in percent of samples. */
  ungrantedSamplePercent: number;
  /** Most ungranted locks seen in one sample. */
  maxUngranted: number;
  /** Active backend-samples by wait event (`type:event`, or `CPU` when not waiting), most frequent first. */
  waitEvents: Record<string, number>;
  /** Ungranted locks seen, by `locktype mode [class] [relation]`, summed over the samples. */
  ungrantedLocks: Record<string, number>;
  /** Share of active backend-samples waiting on a heavyweight lock (`Lock`: row, tuple, transaction, object). */
  heavyweightPercent: number | null;
  /** Share waiting on a lightweight lock (`LWLock`: buffers, WAL insertion and writing, lock tables). */
  lightweightPercent: number | null;
}

const QUERY = `
  WITH mine AS (
    SELECT pid, state, wait_event_type, wait_event
      FROM pg_stat_activity
     WHERE datname = current_database() AND backend_type = 'client backend'
       AND pid <> pg_backend_pid() AND application_name IS DISTINCT FROM $1)
  SELECT (SELECT count(*)::int FROM pg_locks l WHERE NOT l.granted AND l.pid IN (SELECT pid FROM mine)) AS ungranted,
         coalesce((SELECT json_agg(concat_ws(' ', l.locktype, l.mode, l.classid::regclass::text,
                                             l.relation::regclass::text))
                     FROM pg_locks l WHERE NOT l.granted AND l.pid IN (SELECT pid FROM mine)), '[]'::json) AS waiting,
         coalesce((SELECT json_agg(json_build_array(wait_event_type, wait_event))
                     FROM mine WHERE state = 'active'), '[]'::json) AS active`;

export interface ContentionSampler {
  /** Stops sampling and returns the summary of what was sampled. */
  stop(): Promise<ContentionSummary>;
}

/** Starts sampling at once on a connection of its own. */
export async function startContentionSampler(postgres: PostgresEnv): Promise<ContentionSampler> {
  const client = new pg.Client({ connectionString: postgres.url, application_name: ADMIN_APPLICATION_NAME });
  client.on('error', () => undefined);
  await client.connect();
  let running = true;
  let samples = 0;
  let active = 0;
  let lockWaits = 0;
  let lwlockWaits = 0;
  let ungrantedSamples = 0;
  let maxUngranted = 0;
  let failure: string | null = null;
  const events = new Map<string, number>();
  const locks = new Map<string, number>();
  const loop = (async () => {
    while (running) {
      const at = performance.now();
      try {
        const { rows } = await client.query<{
          ungranted: number;
          waiting: string[];
          active: [string | null, string | null][];
        }>(QUERY, [ADMIN_APPLICATION_NAME]);
        const row = rows[0];
        if (row) {
          samples++;
          if (row.ungranted > 0) ungrantedSamples++;
          maxUngranted = Math.max(maxUngranted, row.ungranted);
          for (const lock of row.waiting) locks.set(lock, (locks.get(lock) ?? 0) + 1);
          for (const [type, event] of row.active) {
            active++;
            if (type === 'Lock') lockWaits++;
            if (type === 'LWLock') lwlockWaits++;
            const key = type ? `${type}:${event ?? ''}` : 'CPU';
            events.set(key, (events.get(key) ?? 0) + 1);
          }
        }
      } catch (error) {
        failure = errorMessage(error);
        running = false;
      }
      await sleep(Math.max(0, CONTENTION_INTERVAL_MS - (performance.now() - at)));
    }
  })();
  let summary: ContentionSummary | null = null;
  return {
    async stop() {
      running = false;
      await loop;
      if (summary) return summary;
      await client.end().catch(() => undefined);
      if (failure) console.error(`warning: contention sampler stopped: ${failure}`);
      summary = {
        samples,
        activeBackendSamples: active,
        lockWaits,
        lwlockWaits,
        lockWaitPercent: active > 0 ? ((lockWaits + lwlockWaits) / active) * 100 : null,
        meanActive: samples > 0 ? active / samples : 0,
        ungrantedSamplePercent: samples > 0 ? (ungrantedSamples / samples) * 100 : 0,
        maxUngranted,
        waitEvents: Object.fromEntries([...events].sort((a, b) => b[1] - a[1])),
        ungrantedLocks: Object.fromEntries([...locks].sort((a, b) => b[1] - a[1])),
        heavyweightPercent: active > 0 ? (lockWaits / active) * 100 : null,
        lightweightPercent: active > 0 ? (lwlockWaits / active) * 100 : null,
      };
      return summary;
    },
  };
}
