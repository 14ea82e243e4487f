/**
 * The workflow engines `npm run bench:workflows` runs beside horsies, interleaved with its rounds, and the
 * summary block of the targets. Each peer module is loaded by a specifier the type checker does not
 * follow, so the script type-checks and runs without the bench's dependencies (`npm --prefix bench ci`); a
 * peer whose package or server is missing is skipped with one line saying why.
 */
import type { WorkflowPeer, WorkflowPeerEnv, WorkflowPeerModule } from './types.js';

export type { WorkflowSizes } from './types.js';

/** The peers, in the order they run. */
export const WORKFLOW_PEERS: Readonly<Record<string, string>> = {
  dbos: './dbos.js',
  'bullmq-flow': './bullmq-flow.js',
};

/** `--peers`: a comma-separated list of {@link WORKFLOW_PEERS}, `all` (the default) or `none`. */
export function parsePeers(value: string | undefined): string[] {
  const all = Object.keys(WORKFLOW_PEERS);
  if (value === undefined || value === 'all') return all;
  if (value === 'none' || value === '') return [];
  const ids = value.split(',').map((s) => s.trim());
  const unknown = ids.filter((id) => !all.includes(id));
  if (unknown.length > 0)
    throw new Error(`--peers: unknown ${unknown.join(', ')} (known: ${all.join(', ')})`);
  return ids;
}

/** horsies' samples of the same run, one per round, in round order. */
export interface HorsiesSamples {
  /** a: the plain drain, tasks/s. */
  drain: number[];
  /** b: the wide workflow, nodes/s. */
  wide: number[];
  /** c: the chain, ms per step. */
  chainStepMs: number[];
  /** c: the send-to-start latency of single sends, ms. */
  latencyMs: number[];
  /** d: small workflows of 10 nodes, workflows/s. */
  smallPerS: number[];
}

interface PeerSamples {
  chainStepMs: number[];
  wideNodesPerS: number[];
  wideNodes: number;
  smallPerS: number[];
  smallNodesPerS: number[];
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** The peers of one run: opened once, one sample of each shape per round, then the report. */
export class WorkflowAnchors {
  private readonly samples = new Map<string, PeerSamples>();
  private readonly skipped = new Map<string, string>();

  private constructor(private readonly peers: WorkflowPeer[]) {}

  /** Opens the chosen peers; prints one line for each one skipped. */
  static async open(ids: string[], env: WorkflowPeerEnv): Promise<WorkflowAnchors> {
    const peers: WorkflowPeer[] = [];
    const skipped = new Map<string, string>();
    for (const id of ids) {
      const specifier = WORKFLOW_PEERS[id]!;
      let reason: string;
      try {
        const module = (await import(specifier)) as WorkflowPeerModule;
        const opened = await module.open(env);
        if (opened.ok) {
          peers.push(opened.peer);
          continue;
        }
        reason = opened.reason;
      } catch (error) {
        const code = (error as { code?: string }).code;
        reason =
          code === 'ERR_MODULE_NOT_FOUND'
            ? `its package is not installed (npm --prefix bench ci): ${errorText(error)}`
            : `could not start: ${errorText(error)}`;
      }
      skipped.set(id, reason);
      console.error(`peer ${id} skipped: ${reason}`);
    }
    const anchors = new WorkflowAnchors(peers);
    for (const [id, reason] of skipped) anchors.skipped.set(id, reason);
    return anchors;
  }

  /** One sample of each shape for each peer still running; a peer that fails is dropped with one line. */
  async runRound(): Promise<void> {
    for (const peer of [...this.peers]) {
      try {
        const chain = await peer.chain();
        const wide = await peer.wide();
        const small = await peer.small();
        const s = this.samples.get(peer.id) ?? {
          chainStepMs: [],
          wideNodesPerS: [],
          wideNodes: wide.nodes,
          smallPerS: [],
          smallNodesPerS: [],
        };
        s.chainStepMs.push(chain.stepMs);
        s.wideNodesPerS.push(wide.nodesPerS);
        s.smallPerS.push(small.workflowsPerS);
        s.smallNodesPerS.push(small.nodesPerS);
        this.samples.set(peer.id, s);
        console.error(
          `  ${peer.id}: chain ${chain.stepMs.toFixed(2)} ms/step, wide ${wide.nodesPerS.toFixed(0)} nodes/s, ` +
            `small ${small.workflowsPerS.toFixed(1)} workflows/s`,
        );
      } catch (error) {
        const reason = `failed: ${errorText(error)}`;
        console.error(`peer ${peer.id} ${reason}; left out of the later rounds`);
        this.skipped.set(peer.id, reason);
        this.samples.delete(peer.id);
        this.peers.splice(this.peers.indexOf(peer), 1);
        await peer.close().catch(() => undefined);
      }
    }
  }

  /** Prints each peer's figures beside horsies', then the summary block (`target <name> <value> <goal> met|missed`). */
  report(h: HorsiesSamples): void {
    const fig = (v: number[], digits: number): string => {
      const f = (x: number): string => x.toLocaleString('en-US', { maximumFractionDigits: digits });
      return `${f(median(v))} (${f(Math.min(...v))}–${f(Math.max(...v))})`;
    };
    const ratios = (num: number[], den: number[]): number[] =>
      num.slice(0, den.length).map((x, i) => x / den[i]!);
    const horsiesSmallNodes = h.smallPerS.map((x) => x * 10);
    console.log(
      '\nPeers: the same shapes at concurrency 10 in this process, interleaved with the rounds above',
    );
    for (const peer of this.peers) {
      const s = this.samples.get(peer.id);
      if (!s) continue;
      console.log(`${peer.id}: ${peer.version}`);
      console.log(`  settings: ${peer.settings}`);
      console.log(`  keeps: ${peer.keeps}`);
      console.log(
        `  chain: ${fig(s.chainStepMs, 2)} ms per step; horsies ${fig(h.chainStepMs, 2)} (${peer.shapes.chain})`,
      );
      console.log(
        `  wide: ${fig(s.wideNodesPerS, 0)} nodes/s; horsies ${fig(h.wide, 0)} (${peer.shapes.wide})`,
      );
      console.log(
        `  small: ${fig(s.smallPerS, 1)} workflows/s, ${fig(s.smallNodesPerS, 0)} nodes/s; horsies ` +
          `${fig(h.smallPerS, 1)} workflows/s (${peer.shapes.small})`,
      );
    }
    for (const [id, reason] of this.skipped) console.log(`${id}: skipped: ${reason}`);

    console.log('\nsummary');
    const target = (name: string, values: number[], goal: number, atMost: boolean): void => {
      if (values.length === 0) return;
      const v = median(values);
      const met = atMost ? v <= goal : v >= goal;
      console.log(
        `target ${name} ${v.toFixed(2)} ${atMost ? '<=' : '>='}${goal.toFixed(2)} ${met ? 'met' : 'missed'}`,
      );
    };
    target('chain_step_vs_send', ratios(h.chainStepMs, h.latencyMs), 1.5, true);
    target('small_nodes_vs_drain', ratios(horsiesSmallNodes, h.drain), 0.6, false);
    target('wide_nodes_vs_drain', ratios(h.wide, h.drain), 0.8, false);
    for (const id of Object.keys(WORKFLOW_PEERS)) {
      const s = this.samples.get(id);
      const name = id.replace(/-/g, '_');
      if (!s) {
        if (this.skipped.has(id)) console.log(`# ${id} skipped: no chain_vs_${name} or small_vs_${name}`);
        continue;
      }
      // Ahead when above 1: the peer's time per step over horsies', horsies' nodes/s over the peer's.
      target(`chain_vs_${name}`, ratios(s.chainStepMs, h.chainStepMs), 1, false);
      target(`small_vs_${name}`, ratios(horsiesSmallNodes, s.smallNodesPerS), 1, false);
    }
  }

  async close(): Promise<void> {
    for (const peer of this.peers)
      await peer.close().catch((error) => console.error(`${peer.id}: ${errorText(error)}`));
  }
}
