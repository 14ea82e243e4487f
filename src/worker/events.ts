/**
 * What a worker runs (its host, the app), what it tells the outside (its events), and what its parts call back into
 * on the worker itself.
 */
import type { EventEmitter } from 'node:events';
import type { StandardSchemaV1 } from '@standard-schema/spec';
import type { Logger } from 'pino';
import type { ResolvedAppConfig } from '../client/config.js';
import type { TaskDefinition } from '../client/TaskDefinition.js';
import type { Database } from '../db/Database.js';
import type { HorsiesMetrics } from '../metrics/Metrics.js';
import type { ScheduleConfig } from '../scheduler/declare.js';
import type { TaskTracer } from '../tracing/TaskTracer.js';
import type { ChildWorkflows } from '../workflow/step.js';
import type { HeartbeatRole } from '../db/liveness.js';
import type { FinishHook, TaskFinish, TaskFinishRow } from '../db/tasks.js';
import type { CompleterResult } from './Completer.js';

/** What a worker needs of the app it runs: an `App` is one. */
export interface WorkerHost {
  readonly db: Database;
  readonly logger: Logger;
  readonly tasks: ReadonlyMap<string, TaskDefinition<StandardSchemaV1, unknown>>;
  readonly config: Pick<
    ResolvedAppConfig,
    'queues' | 'queueConfigs' | 'clusterWideCap' | 'capMode' | 'prefetchBuffer' | 'recovery' | 'errorCodes'
  >;
  /** Recurring tasks the maintenance leader sends. Default: none. */
  readonly schedules?: readonly ScheduleConfig[];
  /** Metrics to count runs and maintenance in (the app's). Default: none. */
  readonly metrics?: HorsiesMetrics | null;
  /** Spans for runs (the app's tracer). Default: none. */
  readonly tracer?: TaskTracer | null;
  /** Workflows that subworkflow nodes start, by name (an app's registry). Default: none. */
  readonly workflows?: ChildWorkflows;
}

/** Events a worker emits; tests and monitoring await them. */
export interface WorkerEvents {
  'task:claimed': [ids: string[]];
  'task:started': [id: string, attempt: number];
  /** A run ended; its outcome is queued for writing. */
  'task:ran': [id: string, status: TaskFinish['status']];
  /**
   * Outcomes were written: `finished` with the status each task got (PENDING for a retry or release); `lost` had
   * been superseded (reaped, cancelled), so nothing was written for them.
   */
  'task:finished': [finished: TaskFinishRow[], lost: string[]];
  'task:expired': [id: string];
  /** A cancel request reached a task running here; its handler's AbortSignal fired. */
  'task:cancelling': [id: string];
  /** Held tasks the database says this worker no longer owns. */
  'task:lost': [ids: string[]];
  'leader:elected': [];
  'leader:lost': [];
  'maintenance:ran': [service: string, result: unknown];
  'worker:error': [error: unknown];
  'worker:stopped': [];
}

/** A background loop of the worker, started after its LISTEN channels are up. */
export interface WorkerService {
  start(): void;
  stop(): Promise<void> | void;
}

/** What the parts call back into on the worker. */
export interface WorkerSink {
  emit: EventEmitter<WorkerEvents>['emit'];
  fail(what: string, error: unknown): void;
  /** Heartbeats of `role` found these held tasks owned elsewhere now. */
  onLost(role: HeartbeatRole, ids: string[]): void;
  /** A batch of outcomes was written (or found superseded). */
  onSettled(result: CompleterResult, finishes: TaskFinish[]): void;
  /** Writes outcomes that end workflow nodes with their workflows' step, in one transaction (see `Completer`). */
  finishAndStep(finishes: TaskFinish[]): Promise<TaskFinishRow[]>;
  /** Follows outcomes written by maintenance (the reaper), and the workflow steps of tasks handed back, as the worker's own. */
  afterFinish: FinishHook;
}
