/**
 * The workflow builder, the API an app's code uses to define and start workflows. A workflow is built from the
 * app's tasks:
 *
 *   const wf = workflow(app, 'crawl', { params: z.object({ url: z.string() }) });
 *   const page = wf.node(fetchPage, { input: { url: wf.params.url } });
 *   const words = wf.node(countWords, { input: { text: page.result.body } });   // waits for `page`
 *   const crawl = wf.build({ output: words });          // validated as a whole; WorkflowDefinition<.., number>
 *   const handle = await crawl.start({ url: 'https://example.com' });
 *
 * The wiring is typed: `page.result.body` is a reference of the type of `body`, and an input field accepts it
 * only if that type is assignable to the field's (see `refs.ts`). `build()` hands the nodes to the compiler
 * (`compile.ts`), which checks the whole graph and throws one {@link WorkflowDefinitionError} listing every
 * problem. `start()` checks the parameters, then stores the workflow, every node with its wiring and the root
 * nodes' tasks in one transaction, the caller's when given (`insertRun.ts`).
 */
import type { StandardSchemaV1 } from '@standard-schema/spec';
import { v7 as uuidv7 } from 'uuid';
import type { Database, Queryable } from '../db/Database.js';
import { InputValidationError, WorkflowDefinitionError, toIssue } from '../errors.js';
import type { TaskResult, ValidationIssue } from '../errors.js';
import { toCanonicalJson } from '../json.js';
import type { TaskTracer } from '../tracing/TaskTracer.js';
import { isStorableText } from '../types.js';
import type { JsonValue } from '../types.js';
import { compile } from './compile.js';
import type { CompileHost, WorkflowSpec } from './compile.js';
import { insertRun } from './insertRun.js';
import type { RunToInsert } from './insertRun.js';
import { makeRef } from './refs.js';
import type { Ref, Wired } from './refs.js';
import type { ChildWorkflow, ParentLink } from './step.js';
import { WorkflowHandle } from './WorkflowHandle.js';
import type { WorkflowHandleHost } from './WorkflowHandle.js';
import { WaitNode, WorkflowNode } from './WorkflowNode.js';
import type { AnyNode, NestedWorkflow, NodeOptions, NodeTask, SuccessPolicy } from './WorkflowNode.js';

/** What a workflow needs of the app: an `App` is one. */
export interface WorkflowHost extends WorkflowHandleHost, CompileHost {
  readonly db: Database;
  /**
   * Workflows that subworkflow nodes start, by name: a definition used as a node is registered here when its
   * parent is built, so a worker that loads the app can start it for any parent it steps.
   */
  readonly workflows: Map<string, ChildWorkflow>;
  /** Payload schemas of the signals and events wait nodes wait for, by name: registered when a workflow is built. */
  readonly signals: Map<string, StandardSchemaV1>;
  /** Spans for starts, whose trace context the run's tasks carry; null or absent when tracing is off. */
  readonly tracer?: TaskTracer | null;
}

/** How one node runs a whole workflow (a subworkflow): its parameters are wired like a task's input. */
export interface SubworkflowNodeOptions<P> extends Pick<
  NodeOptions<P>,
  'id' | 'waitsFor' | 'join' | 'allowFailedDeps'
> {
  /** The child workflow's parameters: static values, references, or a mix (none for a workflow without). */
  input?: Wired<P> | undefined;
}

/** Where a wait node sits in its workflow: like a subworkflow node, it runs no task of its own. */
export type WaitPlacement = Pick<NodeOptions<unknown>, 'id' | 'waitsFor' | 'join' | 'allowFailedDeps'>;

/** Options of `wf.waitFor()`. */
export interface WaitForOptions<S extends StandardSchemaV1> extends WaitPlacement {
  /** Schema of the payload: a signal or event is validated with it before anything is stored. */
  schema: S;
  /** The node fails `WAIT_TIMEOUT` if no delivery came this many milliseconds after it started waiting. */
  timeoutMs?: number | undefined;
  /**
   * For events (`app.emit`): only an event with this key reaches the node (an order id, a user id). A static
   * string or a reference (`wf.params.orderId`, an upstream result); resolved when the node starts. Default:
   * no key (events emitted without a key).
   */
  key?: Wired<string> | undefined;
}

/** Options of `wf.sleep()`: a length (`ms`, from when the node starts) or a time (`until`). */
export type SleepOptions = ({ ms: number; until?: undefined } | { until: Date; ms?: undefined }) &
  WaitPlacement;

/** The result of a workflow without an output node: each terminal node's outcome, by node id. */
export type TerminalResults = Record<string, TaskResult<unknown>>;

/** Options of {@link workflow}. */
export interface WorkflowOptions<S extends StandardSchemaV1 | undefined> {
  /** Schema of the start parameters (checked at start); nodes read them through `wf.params`. */
  params?: S | undefined;
  /** `fail` (default): a failed node fails the workflow at its end, other branches go on. `pause`: it pauses. */
  onError?: 'fail' | 'pause' | undefined;
}

type ParamsOf<S> = S extends StandardSchemaV1 ? StandardSchemaV1.InferInput<S> : undefined;

/** Options of one start. */
export interface StartOptions {
  /** Explicit workflow id (at most 36 characters): a second start with the same id returns the first workflow. */
  id?: string | undefined;
  /** Run the start inside the caller's transaction: if it rolls back, the workflow never existed. */
  tx?: Queryable | undefined;
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
  /** The ids of `nodes`, and per name the next suffix to try: a node without an id of its own is named in O(1). */
  private readonly ids = new Set<string>();
  private readonly suffixes = new Map<string, number>();
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
    task: NodeTask<T, R>,
    options: NodeOptions<StandardSchemaV1.InferInput<T>>,
  ): WorkflowNode<R>;
  /**
   * Adds a node that runs a whole workflow (a subworkflow) with the wired parameters; its result is the child's
   * result, and it fails `SUBWORKFLOW_FAILED` when the child does not complete.
   */
  node<P, O>(workflow: WorkflowDefinition<P, O>, options?: SubworkflowNodeOptions<P>): WorkflowNode<O>;
  node(
    target: NodeTask | WorkflowDefinition<unknown, unknown>,
    options: NodeOptions<unknown> | SubworkflowNodeOptions<unknown> = {},
  ): WorkflowNode<unknown> {
    return this.add(
      options.id,
      target.name,
      (index, id) =>
        new WorkflowNode<unknown>(
          index,
          id,
          target instanceof WorkflowDefinition ? { workflow: target } : { task: target },
          options as NodeOptions<unknown>,
        ),
    );
  }

  /**
   * Adds a node that runs no task and waits for the signal or event `name`: it completes with the payload of the
   * first delivery (`handle.signal(node, payload)`, or `app.emit(name, payload, { key })` while it waits), typed
   * by `schema`, and fails `WAIT_TIMEOUT` after `timeoutMs`. It holds no worker slot while it waits.
   */
  waitFor<T extends StandardSchemaV1>(
    name: string,
    options: WaitForOptions<T>,
  ): WaitNode<StandardSchemaV1.InferOutput<T>, StandardSchemaV1.InferInput<T>> {
    const node = this.add(options.id, name, (index, id) => {
      const { schema, timeoutMs, key, ...placement } = options;
      return new WaitNode(index, id, { wait: { kind: 'signal', name, schema, timeoutMs } }, {
        ...placement,
        input: key ?? '',
      } as unknown as NodeOptions<unknown>);
    });
    return node as WaitNode<StandardSchemaV1.InferOutput<T>, StandardSchemaV1.InferInput<T>>;
  }

  /**
   * Adds a node that runs no task and ends after `ms` milliseconds from its start, or at `until`; its result is
   * null. The maintenance leader ends it (within one maintenance interval of its time); it holds no worker slot.
   */
  sleep(options: SleepOptions): WorkflowNode<null> {
    return this.add(options.id, 'sleep', (index, id) => {
      const { ms, until, ...placement } = options;
      return new WorkflowNode<null>(index, id, { wait: { kind: 'sleep', ms, until } }, {
        ...placement,
        input: null,
      } as unknown as NodeOptions<unknown>);
    });
  }

  // A node with an id of its own or the next free one after `name`.
  private add<N extends AnyNode>(
    given: string | undefined,
    name: string,
    make: (index: number, id: string) => N,
  ): N {
    if (this.built) throw new Error(`workflow "${this.name}" is already built; add nodes before build()`);
    let id = given ?? name;
    if (given === undefined && this.ids.has(id)) {
      // Every suffix below the one remembered is taken, and ids are never given back.
      let n = this.suffixes.get(name) ?? 2;
      while (this.ids.has(`${name}#${n}`)) n += 1;
      id = `${name}#${n}`;
      this.suffixes.set(name, n + 1);
    }
    const node = make(this.nodes.length, id);
    this.nodes.push(node);
    this.ids.add(node.id);
    return node;
  }

  /**
   * Validates the workflow as a whole and returns its definition. The result type is the output node's, or, with
   * no output node, the map of terminal nodes' outcomes. Throws a {@link WorkflowDefinitionError} listing every
   * problem.
   */
  build<O = TerminalResults>(
    options: { output?: WorkflowNode<O> | undefined; successPolicy?: SuccessPolicy | undefined } = {},
  ): WorkflowDefinition<ParamsOf<S>, O> {
    const spec = compile(this.host, this.name, this.nodes, {
      onError: this.options.onError ?? 'fail',
      output: options.output,
      successPolicy: options.successPolicy,
    });
    this.built = true;
    const children = this.nodes.flatMap((n) => ('workflow' in n.target ? [n.target.workflow] : []));
    for (const child of children) this.host.workflows.set(child.name, child);
    for (const n of this.nodes) {
      if ('wait' in n.target && n.target.wait.kind === 'signal') {
        this.host.signals.set(n.target.wait.name, n.target.wait.schema);
      }
    }
    return new WorkflowDefinition<ParamsOf<S>, O>(this.host, spec, this.options.params, children);
  }
}

/** A built workflow: start runs of it, or get handles of runs by id. */
export class WorkflowDefinition<P, O> implements NestedWorkflow {
  /** @internal Names of the workflows its nodes run, directly or further down. */
  readonly nested: ReadonlySet<string>;

  /** @internal */
  constructor(
    private readonly host: WorkflowHost,
    private readonly spec: WorkflowSpec,
    private readonly paramsSchema: StandardSchemaV1 | undefined,
    children: readonly NestedWorkflow[] = [],
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
    if (issues) throw new InputValidationError(this.spec.name, issues, 'workflow');
    const paramsJson = toCanonicalJson(params ?? null, 'params');
    const id = options.id ?? uuidv7();
    if (typeof id !== 'string' || id.length === 0 || id.length > 36 || !isStorableText(id)) {
      throw new WorkflowDefinitionError(this.spec.name, [
        {
          field: 'start.id',
          value: id,
          message: 'must be 1 to 36 characters, without a NUL character or a lone surrogate',
        },
      ]);
    }
    const span = this.host.tracer?.startWorkflow(this.spec.name, id) ?? null;
    const run = (tx: Queryable) =>
      this.store(tx, { id, paramsJson, parent: null, traceContext: span?.carrier ?? null });
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
    await this.store(tx, {
      id,
      paramsJson: toCanonicalJson(params, 'params'),
      parent,
      traceContext: null,
    });
    return { id };
  }

  /** A handle for a run of this workflow. */
  handle(id: string): WorkflowHandle<O> {
    return new WorkflowHandle<O>(this.host, id);
  }

  // The workflow row, its nodes and its roots' tasks (or children); nothing when a run with this id exists.
  private store(tx: Queryable, run: RunToInsert): Promise<void> {
    return insertRun(this.host.db, tx, this.spec, run, this.host.workflows);
  }

  private async paramIssues(params: unknown): Promise<ValidationIssue[] | null> {
    if (!this.paramsSchema) return null;
    const result = await this.paramsSchema['~standard'].validate(params);
    return result.issues ? result.issues.map(toIssue) : null;
  }
}
