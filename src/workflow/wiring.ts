/**
 * The wiring of a node's input, as stored: the static part (every value known at definition or start) and the
 * references to fill in from upstream nodes when the node is enqueued. Pure functions over JSON, shared by the
 * start (which resolves references to the workflow's parameters) and the workflow step (which resolves the rest).
 */
import type { JsonValue } from '../types.js';

/** One step of a path into a JSON value: an object key or an array index. */
export type PathStep = string | number;

/**
 * Where a value comes from: `result` is an upstream node's ok value (at `from`); `outcome` its whole
 * `TaskResult`; `param` the workflow's start parameters (at `from`).
 */
export interface StoredRef {
  /** Where the value goes in the input; `[]` is the whole input. */
  to: PathStep[];
  kind: 'result' | 'outcome' | 'param';
  /** The upstream node's index (-1 for `param`). */
  node: number;
  from: PathStep[];
}

/** A node's stored input wiring. */
export interface InputTemplate {
  static: JsonValue;
  refs: StoredRef[];
}

/** What a reference reads from an upstream node: its status and stored result envelope. */
export interface UpstreamState {
  status: string;
  result: unknown;
}

/** Reads `path` inside `value`; undefined when the path does not exist. */
function readPath(value: unknown, path: readonly PathStep[]): unknown {
  let current = value;
  for (const step of path) {
    if (current === null || typeof current !== 'object') return undefined;
    current = (current as Record<string | number, unknown>)[step];
  }
  return current;
}

/** Sets `path` inside `target` (creating objects or arrays on the way) and returns the new root. */
function writePath(target: JsonValue, path: readonly PathStep[], value: JsonValue): JsonValue {
  if (path.length === 0) return value;
  const [head, ...rest] = path as [PathStep, ...PathStep[]];
  const container: Record<string | number, JsonValue> | JsonValue[] =
    target !== null && typeof target === 'object'
      ? (target as Record<string, JsonValue>)
      : typeof head === 'number'
        ? []
        : {};
  const child = (container as Record<string | number, JsonValue>)[head] ?? null;
  (container as Record<string | number, JsonValue>)[head] = writePath(child, rest, value);
  return container as JsonValue;
}

/** The stored outcome of an upstream node, as the `TaskResult` a consumer with `.outcome` receives. */
export function outcomeOf(upstream: UpstreamState | undefined): JsonValue {
  const result = upstream?.result as { ok?: JsonValue; err?: JsonValue } | null | undefined;
  switch (upstream?.status) {
    case 'COMPLETED':
      return result && 'ok' in result
        ? { ok: true, value: result.ok ?? null }
        : {
            ok: false,
            error: { code: 'RESULT_NOT_AVAILABLE', message: 'the node completed without a result' },
          };
    case 'FAILED':
    case 'SKIPPED':
      return {
        ok: false,
        error: result?.err ?? { code: 'RESULT_NOT_AVAILABLE', message: `the node ended ${upstream.status}` },
      };
    default:
      return { ok: false, error: { code: 'RESULT_NOT_AVAILABLE', message: 'the node has not finished' } };
  }
}

/**
 * Fills in the references of `template` whose kind is in `kinds`, from `params` and `upstream` (by node
 * index); returns the new template (the remaining references kept). A `result` reference to a node that did not
 * complete resolves to null (validation allows such references only where the node must have completed).
 */
export function resolveRefs(
  template: InputTemplate,
  kinds: ReadonlyArray<StoredRef['kind']>,
  params: JsonValue,
  upstream: ReadonlyMap<number, UpstreamState>,
): InputTemplate {
  let value: JsonValue = structuredClone(template.static);
  const left: StoredRef[] = [];
  for (const ref of template.refs) {
    if (!kinds.includes(ref.kind)) {
      left.push(ref);
      continue;
    }
    let resolved: unknown;
    if (ref.kind === 'param') resolved = readPath(params, ref.from);
    else if (ref.kind === 'outcome') resolved = outcomeOf(upstream.get(ref.node));
    else {
      const state = upstream.get(ref.node);
      resolved =
        state?.status === 'COMPLETED'
          ? readPath((state.result as { ok?: unknown } | null)?.ok, ref.from)
          : null;
    }
    value = writePath(value, ref.to, (resolved ?? null) as JsonValue);
  }
  return { static: value, refs: left };
}
