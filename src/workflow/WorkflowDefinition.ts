/**
 * Defining and starting workflows. A workflow is built from the app's tasks:
 *
 *   const wf = workflow(app, 'crawl', { params: z.object({ url: z.string() }) });
 *   const page = wf.node(fetchPage, { input: { url: wf.params.url } });
 *   const words = wf.node(countWords, { input: { text: page.result.body } });   // waits for `page`
 *   const crawl = wf.build({ output: words });          // validated as a whole; WorkflowDefinition<.., number>
 *   const handle = await crawl.start({ url: 'https://example.com' });
 *
 * The wiring is typed: `page.result.body` is a reference of the type of `body`, and an input field accepts it
 * only if that type is assignable to the field's (see `refs.ts`). `build()` validates the whole graph and throws
 * one {@link WorkflowDefinitionError} listing every problem. `start()` stores the workflow, every node with its
 * wiring, and the root nodes' tasks in one transaction (the caller's, when given).
 */
import { createHash } from 'node:crypto';
import type { StandardSchemaV1 } from '@standard-schema/spec';
import { v7 as uuidv7 } from 'uuid';
import type { TaskDefinition } from '../client/TaskDefinition.js';
import { toCanonicalJson } from '../json.js';
import type { Database, Queryable } from '../db/Database.js';
import { WorkflowInsert, WorkflowNodeInsertMany } from '../db/workflows.js';
import type { WorkflowNodeInsert } from '../db/workflows.js';
import type { TraceCarrier } from '../db/tasks.js';
import { InputValidationError, WorkflowDefinitionError, WorkflowMismatchError, toIssue } from '../errors.js';
import type { ConfigProblem, TaskResult, ValidationIssue } from '../errors.js';
import { resolveRetryPolicy, retryPolicySchema } from '../retry.js';
import type { RetryPolicy } from '../retry.js';
import type { TaskTracer } from '../tracing/TaskTracer.js';
import type { JsonValue } from '../types.js';
import { makeRef, refSource } from './refs.js';
import type { Ref, Wired } from './refs.js';
import { step } from './step.js';
import type { ChildWorkflow, ParentLink } from './step.js';
import { WorkflowHandle } from './WorkflowHandle.js';
import type { WorkflowHandleHost } from './WorkflowHandle.js';
import { resolveRefs } from './wiring.js';
import type { InputTemplate, PathStep, StoredRef } from './wiring.js';

/** What a workflow needs of the app: an `App` is one. */
export interface WorkflowHost extends WorkflowHandleHost {
  readonly db: Database;
  readonly tasks: ReadonlyMap<string, TaskDefinition<StandardSchemaV1, unknown>>;
  readonly config: { readonly queues: readonly string[]; readonly defaultQueue: string };
  /**
   * Workflows that subworkflow nodes start, by name: a definition used as a node is registered here when its
   * parent is built, so a worker that loads the app can start it for any parent it steps.
   */
  readonly workflows: Map<string, ChildWorkflow>;
  /** Spans for starts, whose trace context the run's tasks carry; null or absent when tracing is off. */
  readonly tracer?: TaskTracer | null;
}

/** When a node with several dependencies becomes ready. */
export type NodeJoin = 'all' | 'any' | { quorum: number };

/** How one node runs a task. */
export interface NodeOptions<I> {
  /** The task's input: static values, references to upstream results or parameters, or a mix. */
  input: Wired<I>;
  /** The node's id in the workflow (unique). Default: the task's name, then `name#2`, `name#3`... */
  id?: string;
  /**
   * Nodes (or node ids) that must end first. Default: the nodes its input reads from. When given, it must
   * include every node the input reads from.
   */
  waitsFor?: ReadonlyArray<AnyNode | string>;
  /** Queue of the node's task. Default: the task's queue. */
  queue?: string;
  /** 1–100, lower runs first. Default: the task's priority. */
  priority?: number;
  /** The node's task expires if it has not started by then. */
  goodUntil?: Date;
  /** Overrides of the task's retry policy for this node. */
  retry?: RetryPolicy;
  /**
   * `all` (default): ready once every dependency ended; skipped if one failed or was skipped. `any`: ready at the
   * first completed dependency. `{ quorum: n }`: ready at n completed dependencies.
   */
  join?: NodeJoin;
  /**
   * With `all`: run even when dependencies failed or were skipped. The input then reads upstream outcomes
   * (`node.outcome`, a `TaskResult`), not results.
   */
  allowFailedDeps?: boolean;
}

/** How one node runs a whole workflow (a subworkflow): its parameters are wired like a task's input. */
export interface SubworkflowNodeOptions<P> extends Pick<
  NodeOptions<P>,
  'id' | 'waitsFor' | 'join' | 'allowFailedDeps'
> {
  /** The child workflow's parameters: static values, references, or a mix (none for a workflow without). */
  input?: Wired<P>;
}

/** A node of a workflow being built; `R` is its result type (its task's, or its child workflow's). */
export class WorkflowNode<R> {
  /** The node's result, for the inputs of nodes that wait for it. */
  readonly result: Ref<R>;
  /** The node's outcome (ok value or error; `UPSTREAM_SKIPPED` when skipped), for `any`, `quorum` and `allowFailedDeps` consumers. */
  readonly outcome: Ref<TaskResult<R>>;

  /** @internal */
  constructor(
    readonly index: number,
    readonly id: string,
    /** @internal What it runs: a task, or a workflow. */
    readonly target:
      | { task: TaskDefinition<StandardSchemaV1, unknown> }
      // eslint-disable-next-line @typescript-eslint/no-explicit-any
      | { workflow: WorkflowDefinition<any, any> },
    /** @internal */ readonly options: NodeOptions<unknown>,
  ) {
    this.result = makeRef<R>({ kind: 'result', node: this, path: [] });
    this.outcome = makeRef<TaskResult<R>>({ kind: 'outcome', node: this, path: [] });
  }
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyNode = WorkflowNode<any>;

/** The result of a workflow without an output node: each terminal node's outcome, by node id. */
export type TerminalResults = Record<string, TaskResult<unknown>>;

/** What makes a workflow succeed when not every node must. */
export interface SuccessPolicy {
  /** The workflow succeeds if every node of one case COMPLETED. */
  cases: ReadonlyArray<ReadonlyArray<AnyNode>>;
  /** Nodes whose failure never fails the workflow nor names its error. */
  optional?: ReadonlyArray<AnyNode>;
}

/** Options of {@link workflow}. */
export interface WorkflowOptions<S extends StandardSchemaV1 | undefined> {
  /** Schema of the start parameters (checked at start); nodes read them through `wf.params`. */
  params?: S;
  /** `fail` (default): a failed node fails the workflow at its end, other branches go on. `pause`: it pauses. */
  onError?: 'fail' | 'pause';
}

type ParamsOf<S> = S extends StandardSchemaV1 ? StandardSchemaV1.InferInput<S> : undefined;

/** Options of one start. */
export interface StartOptions {
  /** Explicit workflow id (at most 36 characters): a second start with the same id returns the first workflow. */
  id?: string;
  /** Run the start inside the caller's transaction: if it rolls back, the workflow never existed. */
  tx?: Queryable;
}

/** Starts a workflow definition: `workflow(app, name, options)`, then nodes, then `build()`. */
export function workflow<S extends StandardSchemaV1 | undefined = undefined>(
  host: WorkflowHost,
  name: string,
  options: WorkflowOptions<S> = {},
): WorkflowBuilder<S> {
  return new WorkflowBuilder<S>(host, name, options);
}

/** Collects the nodes of a workflow; see {@link workflow}. */
export class WorkflowBuilder<S extends StandardSchemaV1 | undefined> {
  /** The start parameters, as a reference. */
  readonly params: Ref<ParamsOf<S>>;
  private readonly nodes: AnyNode[] = [];
  private built = false;

  /** @internal */
  constructor(
    private readonly host: WorkflowHost,
    readonly name: string,
    private readonly options: WorkflowOptions<S>,
  ) {
    this.params = makeRef<ParamsOf<S>>({ kind: 'param', node: null, path: [] });
  }

  /** Adds a node that runs `task` with the wired `input`. */
  node<T extends StandardSchemaV1, R>(
    task: TaskDefinition<T, R>,
    options: NodeOptions<StandardSchemaV1.InferInput<T>>,
  ): WorkflowNode<R>;
  /**
   * Adds a node that runs a whole workflow (a subworkflow) with the wired parameters; its result is the child's
   * result, and it fails `SUBWORKFLOW_FAILED` when the child does not complete.
   */
  node<P, O>(workflow: WorkflowDefinition<P, O>, options?: SubworkflowNodeOptions<P>): WorkflowNode<O>;
  node(
    target: TaskDefinition<StandardSchemaV1, unknown> | WorkflowDefinition<unknown, unknown>,
    options: NodeOptions<unknown> | SubworkflowNodeOptions<unknown> = {},
  ): WorkflowNode<unknown> {
    if (this.built) throw new Error(`workflow "${this.name}" is already built; add nodes before build()`);
    const name = target.name;
    const taken = new Set(this.nodes.map((n) => n.id));
    let id = options.id ?? name;
    for (let n = 2; options.id === undefined && taken.has(id); n += 1) id = `${name}#${n}`;
    const node = new WorkflowNode<unknown>(
      this.nodes.length,
      id,
      target instanceof WorkflowDefinition ? { workflow: target } : { task: target },
      options as NodeOptions<unknown>,
    );
    this.nodes.push(node);
    return node;
  }

  /**
   * Validates the workflow as a whole and returns its definition. The result type is the output node's, or, with
   * no output node, the map of terminal nodes' outcomes. Throws a {@link WorkflowDefinitionError} listing every
   * problem.
   */
  build<O = TerminalResults>(
    options: { output?: WorkflowNode<O>; successPolicy?: SuccessPolicy } = {},
  ): WorkflowDefinition<ParamsOf<S>, O> {
    const spec = compile(this.host, this.name, this.nodes, {
      onError: this.options.onError ?? 'fail',
      output: options.output,
      successPolicy: options.successPolicy,
    });
    this.built = true;
    const children = this.nodes.flatMap((n) => ('workflow' in n.target ? [n.target.workflow] : []));
    for (const child of children) this.host.workflows.set(child.name, child);
    return new WorkflowDefinition<ParamsOf<S>, O>(this.host, spec, this.options.params, children);
  }
}

/** A node as stored, before the start's parameters are filled in. */
interface NodeSpec extends Omit<WorkflowNodeInsert, 'inputTemplate' | 'status'> {
  template: InputTemplate;
}

/** A validated workflow, ready to store. */
interface WorkflowSpec {
  name: string;
  onError: 'fail' | 'pause';
  outputIndex: number | null;
  successPolicy: { cases: number[][]; optional: number[] } | null;
  nodes: NodeSpec[];
  /** Digest of everything above. */
  sha: string;
}

/** A built workflow: start runs of it, or get handles of runs by id. */
export class WorkflowDefinition<P, O> implements ChildWorkflow {
  /** @internal Names of the workflows its nodes run, directly or further down. */
  readonly nested: ReadonlySet<string>;

  /** @internal */
  constructor(
    private readonly host: WorkflowHost,
    private readonly spec: WorkflowSpec,
    private readonly paramsSchema: StandardSchemaV1 | undefined,
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    children: readonly WorkflowDefinition<any, any>[] = [],
  ) {
    this.nested = new Set(children.flatMap((c) => [c.name, ...c.nested]));
  }

  /** The workflow's name: also the key under which subworkflow nodes find it. */
  get name(): string {
    return this.spec.name;
  }

  /**
   * Starts a run: the workflow row, every node row and the tasks of the root nodes in one transaction. Bad
   * parameters throw before anything is stored. With an explicit id, a second start returns the first run; a
   * start with the same id but another definition or parameters throws a {@link WorkflowMismatchError}.
   */
  async start(
    ...[params, options = {}]: P extends undefined
      ? [params?: P, options?: StartOptions]
      : [params: P, options?: StartOptions]
  ): Promise<WorkflowHandle<O>> {
    const issues = await this.paramIssues(params);
    if (issues) throw new InputValidationError(`workflow ${this.spec.name}`, issues);
    const paramsJson = toCanonicalJson(params ?? null, 'params');
    const id = options.id ?? uuidv7();
    if (id.length === 0 || id.length > 36) {
      throw new WorkflowDefinitionError(this.spec.name, [
        { field: 'start.id', value: id, message: 'must be 1 to 36 characters' },
      ]);
    }
    const span = this.host.tracer?.startWorkflow(this.spec.name, id) ?? null;
    const run = (tx: Queryable) => this.insertRun(tx, id, paramsJson, null, span?.carrier ?? null);
    try {
      if (options.tx) await run(options.tx);
      else await this.host.db.transaction(run);
    } catch (error) {
      span?.fail(error);
      throw error;
    }
    span?.end([]);
    return this.handle(id);
  }

  /** @internal Starts a run as the child of a subworkflow node, inside its parent's step. */
  async startChild(
    tx: Queryable,
    params: JsonValue,
    parent: ParentLink,
  ): Promise<{ id: string } | { error: { code: string; message: string } }> {
    const issues = await this.paramIssues(params);
    if (issues) {
      const detail = issues.map((i) => `${i.path.join('.') || '(params)'}: ${i.message}`).join('; ');
      return {
        error: { code: 'VALIDATION_FAILED', message: `parameters of workflow "${this.name}": ${detail}` },
      };
    }
    const id = uuidv7();
    await this.insertRun(tx, id, toCanonicalJson(params, 'params'), parent);
    return { id };
  }

  /** A handle for a run of this workflow. */
  handle(id: string): WorkflowHandle<O> {
    return new WorkflowHandle<O>(this.host, id);
  }

  // The workflow row, its nodes and its roots' tasks (or children); nothing when a run with this id exists.
  private async insertRun(
    tx: Queryable,
    id: string,
    paramsJson: string,
    parent: ParentLink | null,
    traceContext: TraceCarrier | null = null,
  ): Promise<void> {
    const { db } = this.host;
    const sha = createHash('sha256').update(this.spec.sha).update('\0').update(paramsJson).digest('hex');
    const [stored] = await db.run(
      WorkflowInsert,
      {
        id,
        name: this.spec.name,
        onError: this.spec.onError,
        outputIndex: this.spec.outputIndex,
        successPolicy: this.spec.successPolicy === null ? null : JSON.stringify(this.spec.successPolicy),
        definitionSha: sha,
        params: paramsJson,
        nodesTotal: this.spec.nodes.length,
        parent: parent && {
          workflowId: parent.workflowId,
          nodeIndex: parent.nodeIndex,
          rootId: parent.rootId,
          depth: parent.depth,
        },
        traceContext,
      },
      tx,
    );
    if (!stored?.created) {
      if (stored?.definition_sha !== sha) throw new WorkflowMismatchError(id);
      return;
    }
    const parsedParams = JSON.parse(paramsJson) as JsonValue;
    const nodes = this.spec.nodes.map((node) => ({
      node,
      template: resolveRefs(node.template, ['param'], parsedParams, new Map()),
    }));
    await db.run(
      WorkflowNodeInsertMany,
      {
        workflowId: id,
        nodes: nodes.map(({ node, template }) => ({
          ...node,
          inputTemplate: JSON.stringify(template),
          status: node.dependencies.length === 0 ? ('READY' as const) : ('PENDING' as const),
        })),
      },
      tx,
    );
    // The roots are READY: their tasks are enqueued, or their child workflows started, in this transaction.
    const roots = nodes.filter(({ node }) => node.dependencies.length === 0);
    await step(db, tx, id, {
      nodes: [],
      ready: roots.map(({ node, template }) => ({
        node_index: node.index,
        input_template: template,
        upstream: null,
        subworkflow: node.subworkflow,
      })),
      children: this.host.workflows,
    });
  }

  private async paramIssues(params: unknown): Promise<ValidationIssue[] | null> {
    if (!this.paramsSchema) return null;
    const result = await this.paramsSchema['~standard'].validate(params);
    return result.issues ? result.issues.map(toIssue) : null;
  }
}

/** Validates nodes and turns them into a stored spec; throws one error listing every problem. */
function compile(
  host: WorkflowHost,
  name: string,
  nodes: readonly AnyNode[],
  options: {
    onError: 'fail' | 'pause';
    output: AnyNode | undefined;
    successPolicy: SuccessPolicy | undefined;
  },
): WorkflowSpec {
  const problems: ConfigProblem[] = [];
  const problem = (field: string, value: unknown, message: string): void => {
    problems.push({ field, value, message });
  };
  if (nodes.length === 0) problem('nodes', [], 'a workflow needs at least one node');
  const byId = new Map<string, AnyNode>();
  for (const node of nodes) {
    if (byId.has(node.id)) problem(`nodes.${node.id}.id`, node.id, 'is used by two nodes');
    else byId.set(node.id, node);
  }
  const own = new Set<object>(nodes);
  const specs: NodeSpec[] = nodes.map((node) => {
    const field = `nodes.${node.id}`;
    const o = node.options;
    const runs =
      'task' in node.target
        ? taskRun(host, node.target.task, o, field, problem)
        : childRun(host, name, node.target.workflow, o, field, problem);
    // A subworkflow node of a workflow without parameters needs no input.
    const input = 'workflow' in node.target ? (o.input ?? null) : o.input;
    const { template, sources } = wire(input, `${field}.input`, own, problem);
    const dependencies = new Set<number>();
    if (o.waitsFor === undefined) {
      for (const source of sources) dependencies.add(source.index);
    } else {
      for (const dep of o.waitsFor) {
        const target = typeof dep === 'string' ? byId.get(dep) : own.has(dep) ? dep : undefined;
        if (!target) {
          problem(
            `${field}.waitsFor`,
            typeof dep === 'string' ? dep : dep.id,
            'is not a node of this workflow',
          );
        } else dependencies.add(target.index);
      }
      for (const source of sources) {
        if (!dependencies.has(source.index)) {
          problem(`${field}.input`, source.id, 'reads from a node that is not in waitsFor');
        }
      }
    }
    if (dependencies.has(node.index)) problem(`${field}.waitsFor`, node.id, 'a node cannot wait for itself');
    const join = o.join ?? 'all';
    const joinRule = typeof join === 'string' ? join : 'quorum';
    let minSuccess: number | null = null;
    if (typeof join === 'object') {
      minSuccess = join.quorum;
      if (!Number.isInteger(minSuccess) || minSuccess < 1 || minSuccess > dependencies.size) {
        problem(
          `${field}.join.quorum`,
          minSuccess,
          `must be an integer from 1 to its ${dependencies.size} dependencies`,
        );
      }
    } else if (join !== 'all' && join !== 'any') {
      problem(`${field}.join`, join, "must be 'all', 'any' or { quorum: n }");
    }
    if (joinRule !== 'all' && dependencies.size === 0) {
      problem(`${field}.join`, join, 'needs dependencies to join');
    }
    const lenient = joinRule !== 'all' || o.allowFailedDeps === true;
    if (lenient && template.refs.some((r) => r.kind === 'result')) {
      problem(
        `${field}.input`,
        template.refs.filter((r) => r.kind === 'result').map((r) => r.to.join('.') || '(whole input)'),
        'may run without every dependency completed: read upstream values through node.outcome, not node.result',
      );
    }
    return {
      index: node.index,
      nodeId: node.id,
      ...runs,
      dependencies: [...dependencies].sort((a, b) => a - b),
      dependents: [],
      join: joinRule,
      minSuccess,
      allowFailedDeps: o.allowFailedDeps === true,
      template,
    };
  });
  for (const spec of specs) for (const dep of spec.dependencies) specs[dep]?.dependents.push(spec.index);
  const cycle = findCycle(specs);
  if (cycle)
    problem(
      'nodes',
      cycle.map((i) => nodes[i]?.id),
      'form a cycle',
    );
  else if (specs.length > 0 && !specs.some((s) => s.dependencies.length === 0)) {
    problem('nodes', [], 'no node is a root (every node waits for another)');
  }
  const indexOf = (node: AnyNode, field: string): number => {
    if (!own.has(node)) problem(field, (node as { id?: unknown })?.id, 'is not a node of this workflow');
    return node.index;
  };
  const outputIndex = options.output === undefined ? null : indexOf(options.output, 'output');
  let successPolicy: WorkflowSpec['successPolicy'] = null;
  if (options.successPolicy) {
    const { cases, optional = [] } = options.successPolicy;
    if (cases.length === 0 || cases.some((c) => c.length === 0)) {
      problem('successPolicy.cases', cases.length, 'must list at least one case, each of at least one node');
    }
    successPolicy = {
      cases: cases.map((c, i) => c.map((n) => indexOf(n, `successPolicy.cases.${i}`))),
      optional: optional.map((n) => indexOf(n, 'successPolicy.optional')),
    };
  }
  if (problems.length > 0) throw new WorkflowDefinitionError(name, problems);
  const body = { name, onError: options.onError, outputIndex, successPolicy, nodes: specs };
  return { ...body, sha: createHash('sha256').update(JSON.stringify(body)).digest('hex') };
}

/** What a node runs, as stored: its task's name, queue, priority, retries and expiry, or its child workflow. */
type NodeRun = Pick<
  NodeSpec,
  'taskName' | 'queueName' | 'priority' | 'maxRetries' | 'taskOptions' | 'goodUntil' | 'subworkflow'
>;

type Problem = (field: string, value: unknown, message: string) => void;

/** A task node's run: the task's settings with the node's overrides, checked. */
function taskRun(
  host: WorkflowHost,
  task: TaskDefinition<StandardSchemaV1, unknown>,
  o: NodeOptions<unknown>,
  field: string,
  problem: Problem,
): NodeRun {
  if (host.tasks.get(task.name) !== task) {
    problem(`${field}.task`, task.name, "is not a task of this workflow's app");
  }
  const queue = o.queue ?? task.queue;
  if (!host.config.queues.includes(queue)) {
    problem(`${field}.queue`, queue, `is not one of the app's queues (${host.config.queues.join(', ')})`);
  }
  const priority = o.priority ?? task.priority;
  if (!Number.isInteger(priority) || priority < 1 || priority > 100) {
    problem(`${field}.priority`, priority, 'must be an integer from 1 to 100');
  }
  if (o.goodUntil !== undefined && !(o.goodUntil instanceof Date && !Number.isNaN(o.goodUntil.getTime()))) {
    problem(`${field}.goodUntil`, o.goodUntil, 'must be a valid Date');
  }
  const retry = retryOverride(task, o.retry, `${field}.retry`, problem);
  return {
    taskName: task.name,
    queueName: queue,
    priority,
    maxRetries: retry.maxRetries,
    taskOptions: retry.maxRetries > 0 ? JSON.stringify({ retry }) : null,
    goodUntil: o.goodUntil ?? null,
    subworkflow: null,
  };
}

/**
 * A subworkflow node's run: the child workflow's name, which must name this definition alone in the app and
 * must not lead back to the workflow being built (a cycle through nested definitions).
 */
function childRun(
  host: WorkflowHost,
  parentName: string,
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  child: WorkflowDefinition<any, any>,
  o: NodeOptions<unknown>,
  field: string,
  problem: Problem,
): NodeRun {
  for (const key of ['queue', 'priority', 'goodUntil', 'retry'] as const) {
    if (o[key] !== undefined) {
      problem(`${field}.${key}`, o[key], 'a subworkflow node runs no task of its own; set it on the child');
    }
  }
  const registered = host.workflows.get(child.name);
  if (registered !== undefined && registered !== child) {
    problem(`${field}.workflow`, child.name, 'another workflow of this app is registered under this name');
  }
  if (child.name === parentName || child.nested.has(parentName)) {
    problem(
      `${field}.workflow`,
      child.name,
      `leads back to "${parentName}": a cycle through nested workflows`,
    );
  }
  return {
    taskName: child.name,
    queueName: host.config.defaultQueue,
    priority: 100,
    maxRetries: 0,
    taskOptions: null,
    goodUntil: null,
    subworkflow: child.name,
  };
}

/**
 * Splits a wired input into its static part and its references; reports references to nodes of another
 * workflow and static values JSON cannot carry. Returns the nodes the input reads from.
 */
function wire(
  input: unknown,
  field: string,
  own: Set<object>,
  problem: Problem,
): { template: InputTemplate; sources: AnyNode[] } {
  const refs: StoredRef[] = [];
  const sources = new Set<AnyNode>();
  const walk = (value: unknown, path: PathStep[]): unknown => {
    const source = refSource(value);
    if (source) {
      const node = source.node as AnyNode | null;
      if (node && !own.has(node)) {
        problem(
          `${field}${path.map((p) => `.${p}`).join('')}`,
          node.id,
          'reads from a node of another workflow',
        );
      } else if (node) sources.add(node);
      refs.push({ to: path, kind: source.kind, node: node?.index ?? -1, from: source.path });
      return null;
    }
    if (Array.isArray(value)) return value.map((v, i) => walk(v, [...path, i]));
    if (
      value !== null &&
      typeof value === 'object' &&
      [Object.prototype, null].includes(Object.getPrototypeOf(value))
    ) {
      return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, walk(v, [...path, k])]));
    }
    return value;
  };
  const staticPart = walk(input, []);
  let json: JsonValue = null;
  try {
    json = JSON.parse(toCanonicalJson(staticPart, field)) as JsonValue;
  } catch (error) {
    problem(field, staticPart, `static input cannot be stored as JSON: ${(error as Error).message}`);
  }
  return { template: { static: json, refs }, sources: [...sources] };
}

/** The node's retry policy: the task's, with the node's overrides. */
function retryOverride(
  task: TaskDefinition<StandardSchemaV1, unknown>,
  override: RetryPolicy | undefined,
  field: string,
  problem: (field: string, value: unknown, message: string) => void,
) {
  if (override === undefined) return task.policies.retry;
  const parsed = retryPolicySchema.safeParse(override);
  if (!parsed.success) {
    for (const issue of parsed.error.issues)
      problem(`${field}.${issue.path.join('.')}`, override, issue.message);
    return task.policies.retry;
  }
  const base = task.policies.retry;
  const merged = resolveRetryPolicy(parsed.data, {
    ...base,
    retryOn: [...base.retryOn],
    backoff: Array.isArray(base.backoff) ? [...base.backoff] : (base.backoff as RetryPolicy['backoff']),
  });
  if (merged.maxRetries > 0 && merged.retryOn.length === 0) {
    problem(`${field}.retryOn`, merged.retryOn, 'must list the error codes that retry when maxRetries > 0');
  }
  return merged;
}

/** A cycle among the nodes' dependencies (as node indexes), or null. */
function findCycle(specs: readonly NodeSpec[]): number[] | null {
  const state = new Map<number, 'open' | 'done'>();
  const stack: number[] = [];
  const visit = (index: number): number[] | null => {
    if (state.get(index) === 'done') return null;
    if (state.get(index) === 'open') return stack.slice(stack.indexOf(index));
    state.set(index, 'open');
    stack.push(index);
    for (const dep of specs[index]?.dependencies ?? []) {
      const cycle = visit(dep);
      if (cycle) return cycle;
    }
    stack.pop();
    state.set(index, 'done');
    return null;
  };
  for (const spec of specs) {
    const cycle = visit(spec.index);
    if (cycle) return cycle;
  }
  return null;
}
