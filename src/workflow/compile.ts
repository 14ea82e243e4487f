/**
 * The workflow compiler: turns the nodes a builder collected into the spec a start stores (each node's run, its
 * dependency indexes, its join rule and the wiring of its input, with a digest of it all), and checks the
 * definition as a whole, throwing one {@link WorkflowDefinitionError} that lists every problem. It is pure: it
 * reads the app's tasks, queues and registered workflows and touches no database, so a definition is checked
 * where it is built, and tested without PostgreSQL.
 *
 * It stores each node's join rule (`join_rule`, `min_success`, `allow_failed_deps`) and checks its bounds; it does
 * not apply it. Where the rules are applied: docs/workflows.md, "Where the join rules are decided".
 */
import { createHash } from 'node:crypto';
import type { StandardSchemaV1 } from '@standard-schema/spec';
import type { WorkflowNodeInsert } from '../db/workflows.js';
import { WorkflowDefinitionError } from '../errors.js';
import type { ConfigProblem } from '../errors.js';
import { toCanonicalJson } from '../json.js';
import { resolveRetryPolicy, retryPolicySchema } from '../retry.js';
import type { ResolvedRetryPolicy, RetryPolicy } from '../retry.js';
import { isStorableDate, isStorableText } from '../types.js';
import type { JsonValue } from '../types.js';
import { refSource } from './refs.js';
import type { InputTemplate, PathStep, StoredRef } from './wiring.js';
import type {
  AnyNode,
  NestedWorkflow,
  NodeOptions,
  NodeTask,
  SuccessPolicy,
  WaitTarget,
} from './WorkflowNode.js';

/** What compiling needs of the app: an `App` is one. */
export interface CompileHost {
  /** The app's tasks by name: a task node must run one of them. */
  readonly tasks: ReadonlyMap<string, NodeTask>;
  readonly config: { readonly queues: readonly string[]; readonly defaultQueue: string };
  /** Workflows registered for subworkflow nodes, by name: a child must be the one registered under its name. */
  readonly workflows: ReadonlyMap<string, unknown>;
  /** Payload schemas of signals by name: a wait node must bring the schema registered under its name, if any. */
  readonly signals: ReadonlyMap<string, StandardSchemaV1>;
}

/** A node as stored, before the start's parameters are filled in. */
export interface NodeSpec extends Omit<WorkflowNodeInsert, 'inputTemplate' | 'status'> {
  template: InputTemplate;
}

/** A validated workflow, ready to store. */
export interface WorkflowSpec {
  name: string;
  onError: 'fail' | 'pause';
  outputIndex: number | null;
  successPolicy: { cases: number[][]; optional: number[] } | null;
  nodes: NodeSpec[];
  /** Digest of everything above. */
  sha: string;
}

/** Validates nodes and turns them into a stored spec; throws one error listing every problem. */
export function compile(
  host: CompileHost,
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
  // The name and the node ids are stored as text of at most 255 characters, which cannot hold NUL either.
  if (typeof name !== 'string' || name.length > 255 || !isStorableText(name)) {
    problem('name', name, 'must be a string of at most 255 characters, without NUL or a lone surrogate');
  }
  const byId = new Map<string, AnyNode>();
  for (const node of nodes) {
    if (byId.has(node.id)) problem(`nodes.${node.id}.id`, node.id, 'is used by two nodes');
    else byId.set(node.id, node);
    const { id } = node;
    if (typeof id !== 'string' || id.length === 0 || id.length > 255 || !isStorableText(id)) {
      problem(
        `nodes.${String(id)}.id`,
        id,
        'must be a string of 1 to 255 characters, without NUL or a lone surrogate',
      );
    }
  }
  const own = new Set<object>(nodes);
  const specs: NodeSpec[] = nodes.map((node) => {
    const field = `nodes.${node.id}`;
    const o = node.options;
    const runs =
      'task' in node.target
        ? taskRun(host, node.target.task, o, field, problem)
        : 'workflow' in node.target
          ? childRun(host, name, node.target.workflow, o, field, problem)
          : waitRun(host, node.target.wait, nodes, node, field, problem);
    // A subworkflow node of a workflow without parameters needs no input.
    const input = 'task' in node.target ? o.input : (o.input ?? null);
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
            typeof dep === 'string' ? dep : ((dep as AnyNode | null | undefined)?.id ?? dep),
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
    if (own.has(node)) return node.index;
    // Not a node of this workflow: maybe not a node at all (undefined from JavaScript), so no index to read.
    problem(
      field,
      (node as { id?: unknown } | null | undefined)?.id ?? node,
      'is not a node of this workflow',
    );
    return -1;
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

/** What a node runs, as stored: its task's name, queue, priority, retries and expiry, its child workflow, or its wait. */
type NodeRun = Pick<
  NodeSpec,
  | 'taskName'
  | 'queueName'
  | 'priority'
  | 'maxRetries'
  | 'taskOptions'
  | 'goodUntil'
  | 'subworkflow'
  | 'waitKind'
  | 'waitName'
  | 'waitTimeoutMs'
  | 'waitUntil'
>;

/** Longest wait a timer takes: about 100 years, so its due time stays a valid timestamp. */
const MAX_WAIT_MS = 100 * 365 * 24 * 3_600_000;

type Problem = (field: string, value: unknown, message: string) => void;

/** A task node's run: the task's settings with the node's overrides, checked. */
function taskRun(
  host: CompileHost,
  task: NodeTask,
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
  if (o.goodUntil !== undefined && !isStorableDate(o.goodUntil)) {
    const given: unknown = o.goodUntil;
    const valid = given instanceof Date && !Number.isNaN(given.getTime());
    problem(
      `${field}.goodUntil`,
      o.goodUntil,
      valid ? 'must be in the years 1 to 9999' : 'must be a valid Date',
    );
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
 * A wait node's run: no task, the signal it waits for (one payload schema per signal name in an app) with its
 * timeout, or the length or end of a sleep.
 */
function waitRun(
  host: CompileHost,
  wait: WaitTarget,
  nodes: readonly AnyNode[],
  node: AnyNode,
  field: string,
  problem: Problem,
): NodeRun {
  const base = {
    queueName: host.config.defaultQueue,
    priority: 100,
    maxRetries: 0,
    taskOptions: null,
    goodUntil: null,
    subworkflow: null,
  };
  const length = (key: string, ms: number | undefined): void => {
    if (ms !== undefined && (!Number.isInteger(ms) || ms < 0 || ms > MAX_WAIT_MS)) {
      problem(`${field}.${key}`, ms, `must be an integer from 0 to ${MAX_WAIT_MS}`);
    }
  };
  if (wait.kind === 'sleep') {
    if ((wait.ms === undefined) === (wait.until === undefined)) {
      problem(`${field}.sleep`, { ms: wait.ms, until: wait.until }, 'takes either ms or until');
    }
    length('ms', wait.ms);
    if (wait.until !== undefined && !isStorableDate(wait.until)) {
      problem(`${field}.until`, wait.until, 'must be a valid Date in the years 1 to 9999');
    }
    return {
      ...base,
      taskName: 'sleep',
      waitKind: 'sleep',
      waitName: null,
      waitTimeoutMs: wait.ms ?? null,
      waitUntil: wait.until ?? null,
    };
  }
  const { name, schema, timeoutMs } = wait;
  if (typeof name !== 'string' || name.length === 0 || name.length > 255 || !isStorableText(name)) {
    problem(
      `${field}.name`,
      name,
      'must be a string of 1 to 255 characters, without NUL or a lone surrogate',
    );
  }
  if (typeof (schema as Partial<StandardSchemaV1> | undefined)?.['~standard']?.validate !== 'function') {
    problem(`${field}.schema`, schema, 'must be a Standard Schema (zod, valibot, arktype...)');
  }
  const registered = host.signals.get(name);
  const sibling = nodes.find(
    (n) => n !== node && 'wait' in n.target && n.target.wait.kind === 'signal' && n.target.wait.name === name,
  );
  const other =
    sibling && 'wait' in sibling.target && sibling.target.wait.kind === 'signal'
      ? sibling.target.wait.schema
      : undefined;
  if ((registered !== undefined && registered !== schema) || (other !== undefined && other !== schema)) {
    problem(
      `${field}.schema`,
      name,
      'another schema is registered for this signal name: every wait for one name must use one schema object',
    );
  }
  length('timeoutMs', timeoutMs);
  return {
    ...base,
    taskName: name,
    waitKind: 'signal',
    waitName: name,
    waitTimeoutMs: timeoutMs ?? null,
    waitUntil: null,
  };
}

/**
 * A subworkflow node's run: the child workflow's name, which must name this definition alone in the app and
 * must not lead back to the workflow being built (a cycle through nested definitions).
 */
function childRun(
  host: CompileHost,
  parentName: string,
  child: NestedWorkflow,
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
  // The arrays and objects being walked, outermost first: one met again inside itself is a cycle, which JSON
  // cannot carry (and which would walk forever).
  const open: object[] = [];
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
    const plain =
      value !== null &&
      typeof value === 'object' &&
      (Array.isArray(value) || [Object.prototype, null].includes(Object.getPrototypeOf(value)));
    if (!plain) return value;
    if (open.includes(value)) {
      problem(`${field}${path.map((p) => `.${p}`).join('')}`, '[cycle]', 'static input contains a cycle');
      return null;
    }
    open.push(value);
    const copy = Array.isArray(value)
      ? value.map((v, i) => walk(v, [...path, i]))
      : Object.fromEntries(Object.entries(value).map(([k, v]) => [k, walk(v, [...path, k])]));
    open.pop();
    return copy;
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
  task: NodeTask,
  override: RetryPolicy | undefined,
  field: string,
  problem: Problem,
): ResolvedRetryPolicy {
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
