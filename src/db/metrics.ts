/**
 * The one statement behind the cluster gauges, run by the maintenance leader once per pass. It reads only
 * unfinished tasks, through the partial indexes that the hot path keeps anyway: PENDING rows through
 * `horsies_tasks_claim_idx` (`NOT claimed AND finished_at IS NULL`), CLAIMED and RUNNING rows through
 * `horsies_tasks_in_flight_idx` (`claimed`), or a scan of the table when most of it is pending. Finished rows,
 * however many, are never visited. Counting costs about 0.25 µs of CPU per pending task (250 ms for a backlog of a
 * million): it runs in one process ({@link SerialPlansSet}), as a parallel plan would take as many more cores for
 * less than the time it saves.
 */
import { statement } from './sql.js';

/** One queue's unfinished tasks. */
export interface QueueFiguresRow {
  queue_name: string;
  pending: number;
  claimed: number;
  running: number;
  /** Seconds since the oldest due PENDING task became claimable; null when none is due. */
  oldest_pending_age_s: number | null;
}

/** Plans the rest of the transaction without parallel workers. */
export const SerialPlansSet = statement<Record<string, never>, { set_config: string }>(
  'SerialPlansSet',
  `SELECT set_config('max_parallel_workers_per_gather', '0', true)`,
  () => [],
);

/** The cluster's figures: per queue, and the workers that wrote a snapshot within `liveWithinMs`. */
export const ClusterFiguresRead = statement<
  { liveWithinMs: number },
  { queues: QueueFiguresRow[]; live_workers: number }
>(
  'ClusterFiguresRead',
  `WITH pending AS (
     SELECT queue_name, count(*)::int AS pending,
            extract(epoch FROM now() - min(enqueued_at) FILTER (WHERE enqueued_at <= now()))::float8
              AS oldest_pending_age_s
     FROM {{schema}}.horsies_tasks
     WHERE NOT claimed AND finished_at IS NULL
     GROUP BY queue_name
   ), flight AS (
     SELECT queue_name,
            count(*) FILTER (WHERE status = 'CLAIMED')::int AS claimed,
            count(*) FILTER (WHERE status = 'RUNNING')::int AS running
     FROM {{schema}}.horsies_tasks
     WHERE claimed
     GROUP BY queue_name
   ), queues AS (
     SELECT queue_name, COALESCE(p.pending, 0) AS pending, COALESCE(f.claimed, 0) AS claimed,
            COALESCE(f.running, 0) AS running, p.oldest_pending_age_s
     FROM pending p FULL JOIN flight f USING (queue_name)
   )
   SELECT COALESCE((SELECT json_agg(q ORDER BY q.queue_name) FROM queues q), '[]'::json) AS queues,
          (SELECT count(DISTINCT worker_id)::int FROM {{schema}}.horsies_worker_states
           WHERE snapshot_at > now() - $1 * interval '1 millisecond') AS live_workers`,
  ({ liveWithinMs }) => [liveWithinMs],
);
