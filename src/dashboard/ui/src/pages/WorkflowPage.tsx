/**
 * One workflow: its status, times, result or error; its graph drawn with edges (graph/WorkflowGraph.tsx), a
 * node's detail on click (graph/NodeDetail.tsx), the run's timeline (graph/Gantt.tsx), and the graph in layers as
 * text, where a wide layer comes as counts and a long run of finished layers as one line. A child run links to
 * its parent and root. With actions enabled: Pause, Resume, Cancel and Retry failed, as the workflow's status
 * allows.
 */
import type { JSX } from 'preact';
import { useMemo, useState } from 'preact/hooks';
import type { WorkflowDetail, WorkflowLayer, WorkflowNode, WorkflowTimeline } from '../../../contract.js';
import { ActionMessage, JsonBlock, Status, useAction } from '../components.js';
import { ago, count, time } from '../format.js';
import { graphNodes } from '../graph/columns.js';
import { Gantt } from '../graph/Gantt.js';
import { NodeDetail } from '../graph/NodeDetail.js';
import { WorkflowGraph } from '../graph/WorkflowGraph.js';
import { useApi } from '../hooks.js';
import type { PageProps } from './PageProps.js';

/** `COMPLETED 9,990 · RUNNING 10`, most frequent first. */
function counts(tally: Record<string, number>): string {
  return Object.entries(tally)
    .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))
    .map(([label, n]) => `${label} ${count(n)}`)
    .join(' · ');
}

/** A node in the text view of the layers: its id and status; a click selects it. */
function NodeChip(props: { node: WorkflowNode; onSelect: (index: number) => void }): JSX.Element {
  const n = props.node;
  return (
    <button
      type="button"
      class={`chip n-${n.status.toLowerCase()}`}
      data-layer-node={n.id}
      onClick={() => props.onSelect(n.index)}
    >
      {n.id} <span class="muted">{n.status}</span>
    </button>
  );
}

function Layer(props: {
  layer: WorkflowLayer;
  nodes: readonly WorkflowNode[];
  onSelect: (index: number) => void;
}): JSX.Element {
  const l = props.layer;
  const node = (i: number): WorkflowNode => props.nodes[i]!;
  if (l.kind === 'run') {
    return (
      <div class="layer" data-testid="layer">
        <div class="layer-head">
          depth {l.depth}–{l.toDepth}: {count(l.size)} nodes in {l.toDepth - l.depth + 1} layers, all{' '}
          <Status status={l.status} />
        </div>
        <div class="muted">tasks: {counts(l.tasks)}</div>
      </div>
    );
  }
  return (
    <div class="layer" data-testid="layer">
      <div class="layer-head">
        depth {l.depth}: {count(l.size)} node{l.size === 1 ? '' : 's'} · {counts(l.counts)}
      </div>
      {l.kind === 'nodes' ? (
        <div class="layer-nodes">
          {l.nodes.map((i) => (
            <NodeChip key={i} node={node(i)} onSelect={props.onSelect} />
          ))}
        </div>
      ) : (
        <>
          <div class="muted">tasks: {counts(l.tasks)}</div>
          {l.notable.length > 0 ? (
            <div class="layer-nodes">
              {l.notable.map((i) => (
                <NodeChip key={i} node={node(i)} onSelect={props.onSelect} />
              ))}
            </div>
          ) : null}
        </>
      )}
    </div>
  );
}

/** Rows drawn on a run's timeline at most (the earliest by enqueue). */
const TIMELINE_ROWS = 300;

/** The run's timeline: nodes in the order they were enqueued, each queued and running span. */
function RunTimeline(props: { id: string; ids: Map<number, string> }): JSX.Element {
  const { data, error } = useApi<WorkflowTimeline>(`workflows/${encodeURIComponent(props.id)}/timeline`);
  if (error) return <p class="error">{error}</p>;
  if (!data) return <p class="muted">loading timeline…</p>;
  const sent = Date.parse(data.sentAt);
  const iso = (after: number | null | undefined): string | null =>
    after === null || after === undefined ? null : new Date(sent + after).toISOString();
  const key = (i: number): number | null =>
    data.enqueuedMs[i] ?? data.startedMs[i] ?? data.finishedMs[i] ?? null;
  const started = data.status
    .map((_, i) => i)
    .filter((i) => key(i) !== null)
    .sort((a, b) => key(a)! - key(b)! || a - b);
  const waiting = data.status.length - started.length;
  return (
    <>
      <Gantt
        testid="timeline"
        caption={`${count(started.length)} nodes by enqueue time${
          started.length > TIMELINE_ROWS ? ` (the first ${TIMELINE_ROWS} drawn)` : ''
        }${waiting > 0 ? ` · ${count(waiting)} not enqueued yet` : ''}`}
        rows={started.slice(0, TIMELINE_ROWS).map((i) => {
          const id = props.ids.get(i) ?? `#${i}`;
          return {
            key: id,
            label: id,
            status: data.statusNames[data.status[i]!] ?? '',
            queuedAt: iso(data.enqueuedMs[i]),
            startedAt: iso(data.startedMs[i]),
            finishedAt: iso(data.finishedMs[i]),
          };
        })}
      />
    </>
  );
}

const LIVE = ['PENDING', 'RUNNING', 'PAUSED'];

/** The control buttons the workflow's status allows (the server refuses the others anyway). */
function Controls(props: {
  w: WorkflowDetail;
  busy: boolean;
  run: (path: string, body?: unknown, ok?: string) => void;
}): JSX.Element {
  const { w, busy, run } = props;
  const path = (action: string): string => `workflows/${encodeURIComponent(w.id)}/${action}`;
  const failedNodes = w.counts.FAILED ?? 0;
  return (
    <div class="actions" data-testid="workflow-controls">
      {w.status === 'RUNNING' ? (
        <button disabled={busy} onClick={() => run(path('pause'), {}, 'paused')}>
          Pause
        </button>
      ) : null}
      {w.status === 'PAUSED' ? (
        <button disabled={busy} onClick={() => run(path('resume'), {}, 'resumed')}>
          Resume
        </button>
      ) : null}
      {w.status === 'FAILED' || (w.status === 'PAUSED' && failedNodes > 0) ? (
        <button disabled={busy} onClick={() => run(path('retry-failed'), {}, 'failed nodes run again')}>
          Retry failed
        </button>
      ) : null}
      {LIVE.includes(w.status) ? (
        <button disabled={busy} onClick={() => run(path('cancel'), {}, 'cancelled')}>
          Cancel
        </button>
      ) : null}
    </div>
  );
}

export function WorkflowPage(props: PageProps): JSX.Element {
  const id = props.rest[0] ?? '';
  const { data, error, reload } = useApi<WorkflowDetail>(`workflows/${encodeURIComponent(id)}`);
  const [action, run] = useAction(reload);
  const [selected, setSelected] = useState<{ run: string; index: number } | null>(null);
  // Decoded once per answer: a click on a node re-renders the page, and the graph's memos follow this array.
  const nodes = useMemo(() => (data ? graphNodes(data.graph) : []), [data]);
  if (error) return <p class="error">{error}</p>;
  if (!data) return <p class="muted">loading…</p>;
  const w = data;
  const ids = new Map(nodes.map((n) => [n.index, n.id]));
  const chosen = selected?.run === w.id ? selected.index : null;
  const select = (index: number): void => setSelected({ run: w.id, index });
  const envelope = w.result as { ok?: unknown; err?: unknown } | null;
  return (
    <section>
      <h1>
        {w.name} <Status status={w.status} />
      </h1>
      <p class="mono" data-testid="workflow-id">
        {w.id}
      </p>
      <p>
        {w.nodesTerminal}/{w.nodesTotal} nodes done · {counts(w.counts)} · on error {w.onError}
      </p>
      {w.parentWorkflowId ? (
        <p data-testid="workflow-parent">
          sub-workflow of{' '}
          <a href={`#/workflow/${encodeURIComponent(w.parentWorkflowId)}`}>{w.parentWorkflowId}</a>
          <span class="muted"> (its node {w.parentNodeId ?? `#${w.parentNodeIndex}`})</span>
          {w.rootWorkflowId !== w.parentWorkflowId ? (
            <>
              {' '}
              · root <a href={`#/workflow/${encodeURIComponent(w.rootWorkflowId)}`}>{w.rootWorkflowId}</a>
            </>
          ) : null}{' '}
          · depth {w.depth}
        </p>
      ) : null}
      <p>
        sent {time(w.sentAt)} <span class="muted">{ago(w.sentAt)}</span>
        {w.startedAt ? ` · started ${time(w.startedAt)}` : ''}
        {w.completedAt ? ` · completed ${time(w.completedAt)}` : ''}
      </p>
      {props.config.actions ? <Controls w={w} busy={action.busy} run={run} /> : null}
      <ActionMessage state={action} />
      <h2>Graph</h2>
      <div class={chosen === null ? 'graph-area' : 'graph-area with-detail'}>
        <WorkflowGraph runId={w.id} nodes={nodes} selected={chosen} onSelect={select} />
        {chosen !== null ? (
          <NodeDetail
            key={chosen}
            workflowId={w.id}
            index={chosen}
            ids={ids}
            onSelect={select}
            onClose={() => setSelected(null)}
          />
        ) : null}
      </div>
      <h2>Timeline</h2>
      <RunTimeline id={w.id} ids={ids} />
      <details class="dag-text">
        <summary>Layers as text</summary>
        <div class="dag" data-testid="dag">
          {w.layers.map((l) => (
            <Layer key={l.depth} layer={l} nodes={nodes} onSelect={select} />
          ))}
        </div>
      </details>
      <h2>{envelope && 'err' in envelope ? 'Error' : 'Result'}</h2>
      {w.errorCode ? <span class="tag bad">{w.errorCode}</span> : null}
      {w.hidden ? (
        <p class="muted">hidden by the server</p>
      ) : envelope ? (
        <JsonBlock value={'ok' in envelope ? envelope.ok : envelope.err} testid="workflow-result" />
      ) : (
        <p class="muted">none yet</p>
      )}
    </section>
  );
}
