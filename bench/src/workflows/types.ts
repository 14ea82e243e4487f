/**
 * The one interface a workflow engine compared with horsies in `npm run bench:workflows` implements. Each peer
 * runs the same three shapes as horsies' rounds, with the same no-op work, at concurrency 10: a chain, a
 * fan-out/fan-in, and many small workflows queued before the worker starts. Imports nothing: the script that
 * loads the peers is type-checked without the bench's dependencies installed.
 */

/** The sizes of the three shapes, the same as horsies' in the run. */
export interface WorkflowSizes {
  /** Steps of the chain. */
  chain: number;
  /** Parallel nodes between the root and the join of the fan-out/fan-in. */
  wide: number;
  /** Small workflows (1 root, 8 parallel, 1 join) queued before the worker starts. */
  small: number;
}

/** What a peer is opened with. */
export interface WorkflowPeerEnv {
  /** The PostgreSQL horsies runs on in the same run. */
  databaseUrl: string;
  sizes: WorkflowSizes;
}

/** A chain: the time per step, from the start of the workflow to its result, divided by its steps. */
export interface ChainSample {
  stepMs: number;
}

/** A fan-out/fan-in: the nodes it ran and their rate, from the start of the workflow to its result. */
export interface WideSample {
  nodes: number;
  nodesPerS: number;
}

/** Many small workflows queued before the worker: from the worker's start until every one has finished. */
export interface SmallSample {
  workflowsPerS: number;
  nodesPerS: number;
}

/** One engine, opened once for the run; each method is one timed sample on emptied storage. */
export interface WorkflowPeer {
  /** Short name in the output: `dbos`, `bullmq-flow`. */
  readonly id: string;
  /** The version and store, e.g. `@dbos-inc/dbos-sdk 5.3.0 on PostgreSQL`. */
  readonly version: string;
  /** How it is configured, in a sentence or two. */
  readonly settings: string;
  /** What it keeps of each workflow and step (history, results, retention). */
  readonly keeps: string;
  /** How each shape is expressed, and where the engine cannot express it as horsies does. */
  readonly shapes: { chain: string; wide: string; small: string };
  chain(): Promise<ChainSample>;
  wide(): Promise<WideSample>;
  small(): Promise<SmallSample>;
  close(): Promise<void>;
}

/** A peer opened, or the one-line reason it cannot run here (its server or its package missing). */
export type WorkflowPeerOpen = { ok: true; peer: WorkflowPeer } | { ok: false; reason: string };

/** What each peer module exports. */
export interface WorkflowPeerModule {
  open(env: WorkflowPeerEnv): Promise<WorkflowPeerOpen>;
}

/** Polls `check` every 20 ms (as horsies' rounds poll their store) until it holds; throws after `timeoutMs`. */
export async function until(what: string, check: () => Promise<boolean>, timeoutMs = 900_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error(`${what}: timed out after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
