/**
 * The nodes of a workflow being built, and what a node may run. The builder (`WorkflowDefinition.ts`) makes them,
 * the compiler (`compile.ts`) reads them and a handle (`WorkflowHandle.ts`) takes one to type a node's result.
 * They live below all three so that none of those imports another for a shape, and so that the workflow code
 * needs no part of `client/`: a task node names what it needs of a task ({@link NodeTask}), which an app's task
 * definitions have.
 */
import type { StandardSchemaV1 } from '@standard-schema/spec';
import type { TaskResult } from '../errors.js';
import type { ResolvedRetryPolicy, RetryPolicy } from '../retry.js';
import { makeRef } from './refs.js';
import type { Ref, Wired } from './refs.js';
import type { ChildWorkflow } from './step.js';

/**
 * What a task node needs of its task: an app's task definition (`app.task()`) is one. `S` is the task's input
 * schema; `R` its result type, the value its handles' `result()` resolves to.
 */
export interface NodeTask<S extends StandardSchemaV1 = StandardSchemaV1, R = unknown> {
  readonly name: string;
  readonly queue: string;
  readonly priority: number;
  readonly input: S;
  /** The task's policies with the app's defaults applied; a node's `retry` is merged over `retry`. */
  readonly policies: { readonly retry: ResolvedRetryPolicy };
  handle(id: string): { result(): Promise<TaskResult<R>> };
}

/** A built workflow that a subworkflow node runs: a `WorkflowDefinition` is one. */
export interface NestedWorkflow extends ChildWorkflow {
  /** The key under which subworkflow nodes find it. */
  readonly name: string;
  /** Names of the workflows its nodes run, directly or further down. */
  readonly nested: ReadonlySet<string>;
}

/** When a node with several dependencies becomes ready. */
export type NodeJoin = 'all' | 'any' | { quorum: number };

/** How one node runs a task. */
export interface NodeOptions<I> {
  /** The task's input: static values, references to upstream results or parameters, or a mix. */
  input: Wired<I>;
  /** The node's id in the workflow (unique). Default: the task's name, then `name#2`, `name#3`... */
  id?: string | undefined;
  /**
   * Nodes (or node ids) that must end first. Default: the nodes its input reads from. When given, it must
   * include every node the input reads from.
   */
  waitsFor?: ReadonlyArray<AnyNode | string> | undefined;
  /** Queue of the node's task. Default: the task's queue. */
  queue?: string | undefined;
  /** 1–100, lower runs first. Default: the task's priority. */
  priority?: number | undefined;
  /** The node's task expires if it has not started by then. */
  goodUntil?: Date | undefined;
  /** Overrides of the task's retry policy for this node. */
  retry?: RetryPolicy | undefined;
  /**
   * `all` (default): ready once every dependency ended; skipped if one failed or was skipped. `any`: ready at the
   * first completed dependency. `{ quorum: n }`: ready at n completed dependencies.
   */
  join?: NodeJoin | undefined;
  /**
   * With `all`: run even when dependencies failed or were skipped. The input then reads upstream outcomes
   * (`node.outcome`, a `TaskResult`), not results.
   */
  allowFailedDeps?: boolean | undefined;
}

/** What a wait node waits for: a signal or event (typed by its schema), or a time (a sleep). */
export type WaitTarget =
  | { kind: 'signal'; name: string; schema: StandardSchemaV1; timeoutMs: number | undefined }
  | { kind: 'sleep'; ms: number | undefined; until: Date | undefined };

/** A node of a workflow being built; `R` is its result type (its task's, its child workflow's, or its payload's). */
export class WorkflowNode<R> {
  /** The node's result, for the inputs of nodes that wait for it. */
  readonly result: Ref<R>;
  /** The node's outcome (ok value or error; `UPSTREAM_SKIPPED` when skipped), for `any`, `quorum` and `allowFailedDeps` consumers. */
  readonly outcome: Ref<TaskResult<R>>;

  /** @internal */
  constructor(
    readonly index: number,
    readonly id: string,
    /** @internal What it runs: a task, or a workflow; or what it waits for. */
    readonly target: { task: NodeTask } | { workflow: NestedWorkflow } | { wait: WaitTarget },
    /** @internal */ readonly options: NodeOptions<unknown>,
  ) {
    this.result = makeRef<R>({ kind: 'result', node: this, path: [] });
    this.outcome = makeRef<TaskResult<R>>({ kind: 'outcome', node: this, path: [] });
  }
}

/** A node of any result type. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyNode = WorkflowNode<any>;

/** What makes a workflow succeed when not every node must. */
export interface SuccessPolicy {
  /** The workflow succeeds if every node of one case COMPLETED. */
  cases: ReadonlyArray<ReadonlyArray<AnyNode>>;
  /** Nodes whose failure never fails the workflow nor names its error. */
  optional?: ReadonlyArray<AnyNode> | undefined;
}

/**
 * A node that waits for a signal or an event (`wf.waitFor()`): it runs no task and completes with the payload of
 * the first delivery, typed `R` (its schema's output); `I` is what a sender passes (its schema's input).
 */
export class WaitNode<R, I = R> extends WorkflowNode<R> {
  /** @internal Only a wait node takes signals; this field keeps other nodes out of `signal()`'s parameter. */
  declare readonly payloadInput: I;
}
