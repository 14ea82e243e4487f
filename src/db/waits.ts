/**
 * Statements of workflows that wait (migration 30): wait nodes starting, signals and events delivered to them,
 * and the timers the maintenance leader fires. A node that waits is RUNNING with no task; it is settled by the
 * workflow step like any node (`WorkflowNodeSettle`), from its first delivery or its due timer. Every statement
 * that changes a workflow's nodes or deliveries runs after the workflow's row is locked.
 */
import { statement } from './sql.js';

/**
 * READY wait nodes → RUNNING (waiting), each with its key and its timer: a signal's timeout from now, a sleep's
 * end (its time, or its length from now). Nodes no longer READY are left alone.
 */
export const WorkflowNodeStartWaits = statement<
  { workflowId: string; nodes: { index: number; key: string }[] },
  { node_index: number }
>(
  'WorkflowNodeStartWaits',
  `WITH input AS (
     SELECT * FROM unnest($2::int[], $3::text[]) AS i(node_index, wait_key)
   )
   UPDATE {{schema}}.horsies_workflow_tasks n
   SET status = 'RUNNING', wait_key = i.wait_key, enqueued_at = now(), updated_at = now(),
       wait_due_at = CASE WHEN n.wait_until IS NOT NULL THEN n.wait_until
                          WHEN n.wait_timeout_ms IS NOT NULL THEN now() + n.wait_timeout_ms * interval '1 millisecond'
                     END
   FROM input i
   WHERE n.node_key = $1 || ':' || i.node_index AND n.status = 'READY' AND n.wait_kind IS NOT NULL
   RETURNING n.node_index`,
  ({ workflowId, nodes }) => [workflowId, nodes.map((n) => n.index), nodes.map((n) => n.key)],
);

/**
 * Wait nodes whose timer is due, oldest first, at most `limit` of them (one bounded read of
 * `horsies_workflow_tasks_wait_due_idx`), grouped by workflow for one step each.
 */
export const WorkflowWaitsDue = statement<{ limit: number }, { workflow_id: string; nodes: number[] }>(
  'WorkflowWaitsDue',
  `SELECT d.workflow_id, array_agg(d.node_index ORDER BY d.node_index) AS nodes
   FROM (SELECT n.workflow_id, n.node_index FROM {{schema}}.horsies_workflow_tasks n
         WHERE n.status = 'RUNNING' AND n.wait_due_at IS NOT NULL AND n.wait_due_at <= now()
         ORDER BY n.wait_due_at
         LIMIT $1) d
   GROUP BY d.workflow_id`,
  ({ limit }) => [limit],
);

/** A node of a run, as a signal to it needs it: what it waits for and its status. */
export interface WaitNodeRow {
  node_index: number;
  node_id: string;
  status: string;
  wait_kind: 'signal' | 'sleep' | null;
  wait_name: string | null;
  workflow_status: string;
}

/** A node of a run by its id, with what it waits for (none when the run or the node does not exist). */
export const WorkflowWaitNodeGet = statement<{ workflowId: string; nodeId: string }, WaitNodeRow>(
  'WorkflowWaitNodeGet',
  `SELECT n.node_index, n.node_id, n.status, n.wait_kind, n.wait_name, w.status AS workflow_status
   FROM {{schema}}.horsies_workflow_tasks n
   JOIN {{schema}}.horsies_workflows w ON w.id = n.workflow_id
   WHERE n.workflow_id = $1 AND n.node_id = $2`,
  ({ workflowId, nodeId }) => [workflowId, nodeId],
);

/**
 * Stores one delivery for one node of a run (its row locked by the caller) if the node waits for a signal and has
 * not ended; a delivery id already stored for the node stores nothing. Returns the node's status and whether the
 * delivery was stored.
 */
export const WorkflowSignalStore = statement<
  { workflowId: string; nodeIndex: number; deliveryId: string; payload: string },
  { status: string; stored: boolean }
>(
  'WorkflowSignalStore',
  `WITH node AS (
     SELECT n.node_index, n.status FROM {{schema}}.horsies_workflow_tasks n
     WHERE n.node_key = $1 || ':' || $2 AND n.wait_kind = 'signal'
   ), stored AS (
     INSERT INTO {{schema}}.horsies_workflow_signals (workflow_id, delivery_id, node_index, payload)
     SELECT $1, $3, node.node_index, $4::jsonb FROM node WHERE node.status IN ('PENDING', 'READY', 'RUNNING')
     ON CONFLICT (workflow_id, node_index, delivery_id) DO NOTHING
     RETURNING 1
   )
   SELECT node.status, EXISTS (SELECT 1 FROM stored) AS stored FROM node`,
  ({ workflowId, nodeIndex, deliveryId, payload }) => [workflowId, nodeIndex, deliveryId, payload],
);

/**
 * Locks, in id order, the live runs with a node waiting for the event `name` with `key`: concurrent emits lock
 * them in the same order, so they wait for each other rather than deadlock.
 */
export const WorkflowEventTargetsLock = statement<{ name: string; key: string }, { id: string }>(
  'WorkflowEventTargetsLock',
  `SELECT w.id FROM {{schema}}.horsies_workflows w
   WHERE w.id IN (SELECT n.workflow_id FROM {{schema}}.horsies_workflow_tasks n
                  WHERE n.status = 'RUNNING' AND n.wait_kind = 'signal' AND n.wait_name = $1 AND n.wait_key = $2)
     AND w.status IN ('RUNNING', 'PAUSED')
   ORDER BY w.id
   FOR UPDATE OF w`,
  ({ name, key }) => [name, key],
);

/**
 * Stores one delivery of the event `name` with `key` for every node of the given (locked) runs still waiting for
 * it, read afresh after the lock. A node that already holds this delivery id gets nothing more.
 */
export const WorkflowEventStore = statement<
  { ids: string[]; name: string; key: string; deliveryId: string; payload: string },
  { workflow_id: string; node_index: number }
>(
  'WorkflowEventStore',
  `INSERT INTO {{schema}}.horsies_workflow_signals (workflow_id, delivery_id, node_index, payload)
   SELECT n.workflow_id, $4, n.node_index, $5::jsonb FROM {{schema}}.horsies_workflow_tasks n
   WHERE n.workflow_id = ANY ($1::text[]) AND n.status = 'RUNNING' AND n.wait_kind = 'signal'
     AND n.wait_name = $2 AND n.wait_key = $3
   ON CONFLICT (workflow_id, node_index, delivery_id) DO NOTHING
   RETURNING workflow_id, node_index`,
  ({ ids, name, key, deliveryId, payload }) => [ids, name, key, deliveryId, payload],
);
