/**
 * horsies: a PostgreSQL-backed background task queue and workflow engine for Node.js.
 *
 * The public surface, listed by name.
 */
export { App, createApp, isApp } from './client/App.js';
export type { AppConfig, ResolvedAppConfig } from './client/config.js';
export { TaskDefinition } from './client/TaskDefinition.js';
export type {
  SendManyItem,
  ShutdownPolicy,
  TaskConfig,
  TaskContext,
  TaskWorkflowContext,
  TaskHandler,
  TransactionOptions,
} from './client/TaskDefinition.js';
export { TaskHandle } from './client/TaskHandle.js';
export type { SendCallOptions } from './client/send.js';
export type { DebounceOptions, DedupeOptions, DedupeScope, SendOptions } from './client/sendOptions.js';
export type { CancelResult, QueueInfo, ResubmitResult, TaskFilter } from './client/operations.js';
export type { ErrorClass, ErrorCodeMap } from './client/policy.js';
export type { BackoffStrategy, RetryPolicy } from './retry.js';
export type { MetricsConfig, QueueConfig, RateLimit } from './client/config.js';
export type { HorsiesMetrics } from './metrics/Metrics.js';
export { serveMetrics } from './metrics/MetricsServer.js';
export type { MetricsServer, MetricsServerOptions } from './metrics/MetricsServer.js';
export { ProgressTooLargeError } from './worker/ProgressReporter.js';
export type { RecoveryConfig } from './recovery/config.js';
export type { Queryable } from './db/Database.js';
export type { TransactionClient } from './db/HeldTransaction.js';
export type { MigrateResult } from './db/Migrator.js';
export { startEmbeddedServer } from './dev/EmbeddedServer.js';
export type { EmbeddedServer, EmbeddedServerOptions } from './dev/EmbeddedServer.js';
export { Worker, createWorker } from './worker/Worker.js';
export { WorkflowBuilder, WorkflowDefinition, workflow } from './workflow/WorkflowDefinition.js';
export type {
  StartOptions,
  SubworkflowNodeOptions,
  SleepOptions,
  TerminalResults,
  WaitForOptions,
  WaitPlacement,
  WorkflowHost,
  WorkflowOptions,
} from './workflow/WorkflowDefinition.js';
export { WaitNode, WorkflowNode } from './workflow/WorkflowNode.js';
export type { NodeJoin, NodeOptions, SuccessPolicy } from './workflow/WorkflowNode.js';
export type {
  EmitOptions,
  EmitReceipt,
  SignalHost,
  SignalOptions,
  SignalReceipt,
} from './workflow/signals.js';
export { WorkflowHandle } from './workflow/WorkflowHandle.js';
export type { WorkflowFilter, WorkflowInfo, WorkflowNodeInfo } from './workflow/WorkflowHandle.js';
export type {
  CancelResult as WorkflowCancelResult,
  ControlResult as WorkflowControlResult,
} from './workflow/control.js';
export type { Ref, Wired } from './workflow/refs.js';
export type { WorkflowNodeStatus, WorkflowStatus } from './db/workflows.js';
export { Scheduler, createScheduler, slotTaskId } from './scheduler/Scheduler.js';
export type {
  CreateSchedulerOptions,
  FailedSlot,
  SchedulerConfig,
  SchedulerEvents,
  SchedulerResult,
  SchedulerHost,
  SentSlot,
} from './scheduler/Scheduler.js';
export { ManualClock } from './clock.js';
export type { Clock } from './clock.js';
export { declareSchedules } from './scheduler/declare.js';
export type { DeclareOptions, Schedule, ScheduleConfig, SchedulableTask } from './scheduler/declare.js';
export type {
  CronPattern,
  DailyPattern,
  HourlyPattern,
  IntervalPattern,
  MonthlyPattern,
  SchedulePattern,
  WeeklyPattern,
  Weekday,
} from './scheduler/patterns.js';
export type { ScheduleInfo } from './scheduler/operations.js';
export { createDashboard } from './dashboard/Dashboard.js';
export type { Dashboard, DashboardOptions, DashboardSource } from './dashboard/Dashboard.js';
export type { WorkerEvents, WorkerHost } from './worker/Worker.js';
export type {
  WorkerClaimsConfig,
  WorkerConfig,
  WorkerOutcomesConfig,
  WorkerPrefetchConfig,
  WorkerShutdownConfig,
} from './worker/config.js';
export {
  BUILTIN_ERROR_CODES,
  ConfigError,
  DatabaseNotConfiguredError,
  DatabaseUnavailableError,
  DatabaseUrlError,
  EmbeddedServerBusyError,
  EmbeddedServerMissingError,
  HorsiesError,
  InputValidationError,
  NotSerializableError,
  PayloadMismatchError,
  PayloadTooLargeError,
  SchemaNotMigratedError,
  SendOptionsError,
  SignalError,
  TaskError,
  TaskThrottledError,
  TaskTransactionError,
  UnknownQueueError,
  WorkflowDefinitionError,
  WorkflowMismatchError,
  err,
  isValidErrorCode,
  ok,
} from './errors.js';
export type {
  BuiltinErrorCode,
  ConfigProblem,
  TaskResult,
  TaskTransactionErrorCode,
  ValidationIssue,
} from './errors.js';
export { TASK_STATUSES, TERMINAL_STATUSES, isTerminalStatus } from './types.js';
export type {
  AttemptOutcome,
  JsonValue,
  TaskAttempt,
  TaskInfo,
  TaskProgress,
  TaskStatus,
  TaskStep,
} from './types.js';
