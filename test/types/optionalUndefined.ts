/**
 * Every public option that is optional also takes `undefined`, as each one accepts at run time: under
 * `exactOptionalPropertyTypes` (on in `tsc --init`'s defaults) an option typed `x?: string` refuses
 * `{ x: process.env.X }`. `optionalUndefined.test.ts` compiles this file with that flag on, and passes `undefined`
 * for every optional key of {@link PublicOptions} at run time. Compiled only, never run.
 */
import type { StandardSchemaV1 } from '@standard-schema/spec';
import type {
  App,
  AppConfig,
  CreateSchedulerOptions,
  DashboardOptions,
  DebounceOptions,
  DeclareOptions,
  DedupeOptions,
  EmbeddedServerOptions,
  HourlyPattern,
  IntervalPattern,
  MetricsConfig,
  MetricsServerOptions,
  NodeOptions,
  QueueConfig,
  RecoveryConfig,
  RetryPolicy,
  ScheduleConfig,
  SchedulerConfig,
  SendCallOptions,
  SendManyItem,
  SendOptions,
  StartOptions,
  SubworkflowNodeOptions,
  SuccessPolicy,
  TaskConfig,
  TaskFilter,
  TaskHandle,
  TransactionOptions,
  WorkerClaimsConfig,
  WorkerConfig,
  WorkerOutcomesConfig,
  WorkerPrefetchConfig,
  WorkerShutdownConfig,
  WorkflowBuilder,
  WorkflowFilter,
  WorkflowHandle,
  WorkflowOptions,
} from '../../src/index.js';

/** The optional keys of `T` that refuse `undefined` under `exactOptionalPropertyTypes`. */
type RefusesUndefined<T> = {
  [K in keyof T]-?: Partial<Pick<T, K>> extends Pick<T, K>
    ? { [P in K]: undefined } extends Pick<T, K>
      ? never
      : K
    : never;
}[keyof T];

/** Compiles only when `T` is `never`: the error names the keys. */
type None<T extends never> = T;

/** The public option types, by name (the test reads their optional keys from here). */
export interface PublicOptions {
  AppConfig: AppConfig;
  QueueConfig: QueueConfig;
  MetricsConfig: MetricsConfig;
  RecoveryConfig: RecoveryConfig;
  RetryPolicy: RetryPolicy;
  TaskConfig: TaskConfig<StandardSchemaV1, unknown, string, string>;
  TransactionOptions: TransactionOptions;
  TaskFilter: TaskFilter;
  SendOptions: SendOptions;
  SendCallOptions: SendCallOptions;
  SendManyItem: SendManyItem<unknown>;
  DedupeOptions: DedupeOptions;
  DebounceOptions: DebounceOptions;
  WorkerConfig: WorkerConfig;
  WorkerPrefetchConfig: WorkerPrefetchConfig;
  WorkerClaimsConfig: WorkerClaimsConfig;
  WorkerOutcomesConfig: WorkerOutcomesConfig;
  WorkerShutdownConfig: WorkerShutdownConfig;
  DashboardOptions: DashboardOptions;
  MetricsServerOptions: MetricsServerOptions;
  EmbeddedServerOptions: EmbeddedServerOptions;
  SchedulerConfig: SchedulerConfig;
  CreateSchedulerOptions: CreateSchedulerOptions;
  ScheduleConfig: ScheduleConfig;
  DeclareOptions: DeclareOptions;
  IntervalPattern: IntervalPattern;
  HourlyPattern: HourlyPattern;
  WorkflowOptions: WorkflowOptions<StandardSchemaV1>;
  NodeOptions: NodeOptions<unknown>;
  SubworkflowNodeOptions: SubworkflowNodeOptions<unknown>;
  SuccessPolicy: SuccessPolicy;
  StartOptions: StartOptions;
  WorkflowFilter: WorkflowFilter;
  BuildOptions: NonNullable<Parameters<WorkflowBuilder<undefined>['build']>[0]>;
  GetTaskOptions: NonNullable<Parameters<App['getTask']>[1]>;
  ListTasksPage: NonNullable<Parameters<App['listTasks']>[1]>;
  ResubmitFilter: Exclude<Parameters<App['resubmit']>[0], { ids: string[] }>;
  ResultOptions: NonNullable<Parameters<TaskHandle<unknown>['result']>[0]>;
  InfoOptions: NonNullable<Parameters<TaskHandle<unknown>['info']>[0]>;
  WorkflowResultOptions: NonNullable<Parameters<WorkflowHandle<unknown>['result']>[0]>;
}

export type Checked = [
  None<RefusesUndefined<PublicOptions['AppConfig']>>,
  None<RefusesUndefined<PublicOptions['QueueConfig']>>,
  None<RefusesUndefined<PublicOptions['MetricsConfig']>>,
  None<RefusesUndefined<PublicOptions['RecoveryConfig']>>,
  None<RefusesUndefined<PublicOptions['RetryPolicy']>>,
  None<RefusesUndefined<PublicOptions['TaskConfig']>>,
  None<RefusesUndefined<PublicOptions['TransactionOptions']>>,
  None<RefusesUndefined<PublicOptions['TaskFilter']>>,
  None<RefusesUndefined<PublicOptions['SendOptions']>>,
  None<RefusesUndefined<PublicOptions['SendCallOptions']>>,
  None<RefusesUndefined<PublicOptions['SendManyItem']>>,
  None<RefusesUndefined<PublicOptions['DedupeOptions']>>,
  None<RefusesUndefined<PublicOptions['DebounceOptions']>>,
  None<RefusesUndefined<PublicOptions['WorkerConfig']>>,
  None<RefusesUndefined<PublicOptions['WorkerPrefetchConfig']>>,
  None<RefusesUndefined<PublicOptions['WorkerClaimsConfig']>>,
  None<RefusesUndefined<PublicOptions['WorkerOutcomesConfig']>>,
  None<RefusesUndefined<PublicOptions['WorkerShutdownConfig']>>,
  None<RefusesUndefined<PublicOptions['DashboardOptions']>>,
  None<RefusesUndefined<PublicOptions['MetricsServerOptions']>>,
  None<RefusesUndefined<PublicOptions['EmbeddedServerOptions']>>,
  None<RefusesUndefined<PublicOptions['SchedulerConfig']>>,
  None<RefusesUndefined<PublicOptions['CreateSchedulerOptions']>>,
  None<RefusesUndefined<PublicOptions['ScheduleConfig']>>,
  None<RefusesUndefined<PublicOptions['DeclareOptions']>>,
  None<RefusesUndefined<PublicOptions['IntervalPattern']>>,
  None<RefusesUndefined<PublicOptions['HourlyPattern']>>,
  None<RefusesUndefined<PublicOptions['WorkflowOptions']>>,
  None<RefusesUndefined<PublicOptions['NodeOptions']>>,
  None<RefusesUndefined<PublicOptions['SubworkflowNodeOptions']>>,
  None<RefusesUndefined<PublicOptions['SuccessPolicy']>>,
  None<RefusesUndefined<PublicOptions['StartOptions']>>,
  None<RefusesUndefined<PublicOptions['WorkflowFilter']>>,
  None<RefusesUndefined<PublicOptions['BuildOptions']>>,
  None<RefusesUndefined<PublicOptions['GetTaskOptions']>>,
  None<RefusesUndefined<PublicOptions['ListTasksPage']>>,
  None<RefusesUndefined<PublicOptions['ResubmitFilter']>>,
  None<RefusesUndefined<PublicOptions['ResultOptions']>>,
  None<RefusesUndefined<PublicOptions['InfoOptions']>>,
  None<RefusesUndefined<PublicOptions['WorkflowResultOptions']>>,
];
