/** Statements of `horsies check`. */
import { statement } from './sql.js';

/** Sends a notification on `channel` (the LISTEN/NOTIFY round trip of the live check). */
export const NotifySend = statement<{ channel: string; payload: string }, { sent: boolean }>(
  'NotifySend',
  `SELECT pg_notify($1, $2) IS NULL AS sent`,
  ({ channel, payload }) => [channel, payload],
);

/** The names that PENDING tasks carry, per queue, with how many wait under each (the unknown-name check). */
export const PendingTaskNames = statement<
  Record<string, never>,
  { queue_name: string; task_name: string; waiting: number }
>(
  'PendingTaskNames',
  `SELECT queue_name, task_name, count(*)::int AS waiting
   FROM {{schema}}.horsies_tasks WHERE status = 'PENDING'
   GROUP BY queue_name, task_name`,
  () => [],
);
