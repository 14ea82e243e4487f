/**
 * One workflow: its status, times, result or error, and its graph drawn in layers (a node's depth is the longest
 * path to it from a root, so its dependencies sit in the rows above). Each node is a box with its id, task and a
 * status colour, linking to its task, or, for a node that runs a whole workflow, to that child run; a wide layer
 * comes as counts, a long run of finished layers as one line. A child run links to its parent and root. With
 * actions enabled: Pause, Resume, Cancel and Retry failed, as the workflow's status allows.
 */
import type { JSX } from 'preact';
import type { WorkflowDetail, WorkflowLayer, WorkflowNode } from '../../../contract.js';
import { ActionMessage, JsonBlock, Status, useAction } from '../components.js';
import { ago, count, time } from '../format.js';
import { useApi } from '../hooks.js';
import type { PageProps } from './PageProps.js';

/** `COMPLETED 9,990 · RUNNING 10`, most frequent first. */
function counts(tally: Record<string, number>): string {
  return Object.entries(tally)
    .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))
    .map(([label, n]) => `${label} ${count(n)}`)
    .join(' · ');
}

function joinLabel(node: WorkflowNode): string {
  if (node.dependencies.length === 0) return '';
  const rule = node.join === 'quorum' ? `quorum ${node.minSuccess}/${node.dependencies.length}` : node.join;
  return node.allowFailedDeps ? `${rule} +failed` : rule;
}

function NodeBox(props: { node: WorkflowNode; ids: Map<number, string> }): JSX.Element {
  const n = props.node;
  const waits = n.dependencies.map((d) => props.ids.get(d) ?? `#${d}`);
  const title = [
    waits.length > 0 ? `waits for ${waits.slice(0, 8).join(', ')}${waits.length > 8 ? ', …' : ''}` : 'a root',
    joinLabel(n) ? `join ${joinLabel(n)}` : '',
  ]
    .filter(Boolean)
    .join('; ');
  const body = (
    <>
      <div class="node-id">{n.id}</div>
      <div class="node-task">
        {n.subworkflow ? <span class="tag">workflow</span> : null} {n.task}
      </div>
      <div>
        <Status status={n.status} />
        {n.errorCode ? <span class="node-error">{n.errorCode}</span> : null}
      </div>
      {joinLabel(n) && joinLabel(n) !== 'all' ? <div class="muted">{joinLabel(n)}</div> : null}
    </>
  );
  if (n.subworkflow) {
    // A subworkflow node runs no task: it links to the child run it started.
    return n.childWorkflowId ? (
      <a
        class={`node n-${n.status.toLowerCase()}`}
        href={`#/workflow/${encodeURIComponent(n.childWorkflowId)}`}
        title={`${title}; runs workflow ${n.subworkflow}`}
        data-node={n.id}
        data-status={n.status}
        data-child={n.childWorkflowId}
      >
        {body}
      </a>
    ) : (
      <div
        class={`node n-${n.status.toLowerCase()}`}
        title={`${title}; runs workflow ${n.subworkflow} (not started)`}
        data-node={n.id}
        data-status={n.status}
      >
        {body}
      </div>
    );
  }
  return n.taskId ? (
    <a
      class={`node n-${n.status.toLowerCase()}`}
      href={`#/task/${encodeURIComponent(n.taskId)}`}
      title={title}
      data-node={n.id}
      data-status={n.status}
    >
      {body}
    </a>
  ) : (
    <div class={`node n-${n.status.toLowerCase()}`} title={title} data-node={n.id} data-status={n.status}>
      {body}
    </div>
  );
}

function Layer(props: { layer: WorkflowLayer; ids: Map<number, string> }): JSX.Element {
  const l = props.layer;
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
          {l.nodes.map((n) => (
            <NodeBox key={n.index} node={n} ids={props.ids} />
          ))}
        </div>
      ) : (
        <>
          <div class="muted">tasks: {counts(l.tasks)}</div>
          {l.notable.length > 0 ? (
            <div class="layer-nodes">
              {l.notable.map((n) => (
                <NodeBox key={n.index} node={n} ids={props.ids} />
              ))}
            </div>
          ) : null}
        </>
      )}
    </div>
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
  if (error) return <p class="error">{error}</p>;
  if (!data) return <p class="muted">loading…</p>;
  const w = data;
  const ids = new Map<number, string>();
  for (const l of w.layers) {
    if (l.kind === 'nodes') for (const n of l.nodes) ids.set(n.index, n.id);
    if (l.kind === 'summary') for (const n of l.notable) ids.set(n.index, n.id);
  }
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
      <div class="dag" data-testid="dag">
        {w.layers.map((l) => (
          <Layer key={l.depth} layer={l} ids={ids} />
        ))}
      </div>
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
