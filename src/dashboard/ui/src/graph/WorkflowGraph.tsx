/**
 * A workflow's graph in SVG: a box per node (its id, task, and status by colour and by word), an arrow from each
 * dependency to its dependent, pan (drag) and zoom (wheel, buttons), and a click that selects a node for the
 * detail panel. A subworkflow node carries a link to its child run. Large runs stay usable: the layout of a run
 * is computed once (its structure never changes, only statuses), only the nodes and edges in view are drawn, and
 * when zoomed far out the boxes are drawn without text.
 */
import type { JSX } from 'preact';
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import type { WorkflowNode } from '../../../contract.js';
import { ELK_LIMIT, NODE_H, NODE_W, layoutInLayers, layoutWithElk } from './layout.js';
import type { Layout } from './layout.js';

/** Above this many nodes, only what is in view is drawn. */
const DRAW_ALL_LIMIT = 600;
/** Below this zoom, boxes are drawn without text. */
const TEXT_ZOOM = 0.45;
const VIEW_H = 560;

interface View {
  x: number;
  y: number;
  k: number;
}

function short(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

const layouts = new Map<string, Layout>();

/** The layout of a run, computed once per run and kept while the page is open. */
function useLayout(
  key: string,
  nodes: readonly WorkflowNode[],
): { layout: Layout | null; error: string | null } {
  const [state, setState] = useState<{ key: string; layout: Layout | null; error: string | null }>({
    key: '',
    layout: null,
    error: null,
  });
  useEffect(() => {
    const cached = layouts.get(key);
    if (cached) {
      setState({ key, layout: cached, error: null });
      return;
    }
    if (nodes.length > ELK_LIMIT) {
      const layout = layoutInLayers(nodes);
      layouts.set(key, layout);
      setState({ key, layout, error: null });
      return;
    }
    let current = true;
    layoutWithElk(nodes).then(
      (layout) => {
        layouts.set(key, layout);
        if (current) setState({ key, layout, error: null });
      },
      // Should the worker fail, the layered layout still draws the graph.
      (error: Error) => {
        const layout = layoutInLayers(nodes);
        layouts.set(key, layout);
        if (current) setState({ key, layout, error: error.message });
      },
    );
    return () => {
      current = false;
    };
    // The structure of a run never changes: the key (run and node count) stands for the nodes.
  }, [key]);
  return state.key === key ? state : { layout: null, error: null };
}

function NodeShape(props: {
  node: WorkflowNode;
  x: number;
  y: number;
  text: boolean;
  selected: boolean;
  onSelect: (index: number) => void;
}): JSX.Element {
  const { node: n, x, y } = props;
  const status = n.status.toLowerCase();
  const label = `${n.id}: ${n.subworkflow ? `workflow ${n.subworkflow}` : n.task}, ${n.status}${
    n.errorCode ? ` ${n.errorCode}` : ''
  }`;
  return (
    <g
      class={`gnode g-${status}${props.selected ? ' selected' : ''}`}
      transform={`translate(${x},${y})`}
      data-node={n.id}
      data-index={n.index}
      data-status={n.status}
      data-child={n.childWorkflowId ?? undefined}
      role="button"
      tabIndex={0}
      aria-label={label}
      aria-pressed={props.selected}
      onClick={() => props.onSelect(n.index)}
      onKeyDown={(e) => {
        if (e.key === 'Enter' || e.key === ' ') {
          e.preventDefault();
          props.onSelect(n.index);
        }
      }}
    >
      <title>{label}</title>
      <rect class="gbox" width={NODE_W} height={NODE_H} rx={5} />
      <rect class="gbar" width={6} height={NODE_H} rx={2} />
      {props.text ? (
        <>
          <text class="gid" x={14} y={19}>
            {short(n.id, 24)}
          </text>
          <text class="gsub" x={14} y={38}>
            <tspan class="gstatus">{n.status}</tspan>
            {n.subworkflow ? '' : ` · ${short(n.task, 18)}`}
          </text>
          {n.subworkflow && n.childWorkflowId ? (
            <a
              href={`#/workflow/${encodeURIComponent(n.childWorkflowId)}`}
              class="gchild"
              data-testid="child-link"
              onClick={(e) => e.stopPropagation()}
            >
              <text x={NODE_W - 10} y={38} text-anchor="end">
                open run ↗
              </text>
            </a>
          ) : null}
        </>
      ) : null}
    </g>
  );
}

/** The graph of a run; `selected` is the index of the node shown in the detail panel. */
export function WorkflowGraph(props: {
  runId: string;
  nodes: readonly WorkflowNode[];
  selected: number | null;
  onSelect: (index: number) => void;
}): JSX.Element {
  const { nodes } = props;
  const { layout, error } = useLayout(`${props.runId}:${nodes.length}`, nodes);
  const byIndex = useMemo(() => new Map(nodes.map((n) => [n.index, n])), [nodes]);
  const frame = useRef<HTMLDivElement>(null);
  const [width, setWidth] = useState(1200);
  const [view, setView] = useState<View | null>(null);
  const drag = useRef<{ x: number; y: number; view: View } | null>(null);

  useEffect(() => {
    const el = frame.current;
    if (!el) return;
    const observer = new ResizeObserver(() => setWidth(el.clientWidth || 1200));
    observer.observe(el);
    return () => observer.disconnect();
  }, [layout]);

  /** Fits the whole graph; when that would be too small to read, shows its top, centred, at a readable size. */
  const initial = (l: Layout): View => {
    const fit = Math.min(1, (width - 20) / Math.max(l.width, 1), (VIEW_H - 20) / Math.max(l.height, 1));
    const k = fit < TEXT_ZOOM ? 0.75 : fit;
    return { k, x: (width - l.width * k) / 2, y: 10 };
  };
  useEffect(() => {
    if (layout) setView(initial(layout));
  }, [layout]);

  // A node selected elsewhere (the find box, the detail's dependencies, the text view) is brought into view.
  useEffect(() => {
    const b = props.selected === null ? undefined : layout?.boxes.get(props.selected);
    if (!b || !layout) return;
    const h = Math.max(120, Math.min(VIEW_H, layout.height + 30));
    setView((v) => {
      if (!v) return v;
      const x = v.x + b.x * v.k;
      const y = v.y + b.y * v.k;
      if (x >= 0 && y >= 0 && x + NODE_W * v.k <= width && y + NODE_H * v.k <= h) return v;
      const k = Math.max(v.k, TEXT_ZOOM);
      return { k, x: width / 2 - (b.x + NODE_W / 2) * k, y: h / 2 - (b.y + NODE_H / 2) * k };
    });
  }, [props.selected, layout]);

  if (!layout || !view)
    return (
      <p class="muted" data-testid="graph-loading">
        laying out {nodes.length} nodes…
      </p>
    );

  // The frame is as tall as the graph at full size, up to VIEW_H.
  const frameH = Math.max(120, Math.min(VIEW_H, layout.height + 30));
  const zoom = (factor: number, cx = width / 2, cy = frameH / 2): void =>
    setView((v) => {
      if (!v) return v;
      const k = Math.min(2.5, Math.max(0.02, v.k * factor));
      return { k, x: cx - ((cx - v.x) * k) / v.k, y: cy - ((cy - v.y) * k) / v.k };
    });

  // What is in view, in graph coordinates, with a margin of one box.
  const drawAll = nodes.length <= DRAW_ALL_LIMIT;
  const left = -view.x / view.k - NODE_W;
  const top = -view.y / view.k - NODE_H;
  const right = (width - view.x) / view.k + NODE_W;
  const bottom = (frameH - view.y) / view.k + NODE_H;
  const inView = (i: number): boolean => {
    const b = layout.boxes.get(i);
    return b !== undefined && b.x >= left && b.x <= right && b.y >= top && b.y <= bottom;
  };
  const shown = drawAll ? nodes : nodes.filter((n) => inView(n.index));
  const edges = drawAll ? layout.edges : layout.edges.filter((e) => inView(e.from) || inView(e.to));
  const text = view.k >= TEXT_ZOOM;

  return (
    <div class="graph" data-testid="graph" data-engine={layout.engine}>
      <div class="graph-tools">
        <button type="button" onClick={() => zoom(1.25)} aria-label="zoom in">
          +
        </button>
        <button type="button" onClick={() => zoom(0.8)} aria-label="zoom out">
          −
        </button>
        <button
          type="button"
          onClick={() => {
            const k = Math.min(1, (width - 20) / layout.width, (VIEW_H - 20) / layout.height);
            setView({ k, x: (width - layout.width * k) / 2, y: 10 });
          }}
        >
          fit
        </button>
        <form
          class="graph-find"
          onSubmit={(e) => {
            e.preventDefault();
            const wanted = new FormData(e.currentTarget).get('node');
            const hit =
              nodes.find((n) => n.id === wanted) ?? nodes.find((n) => n.id.includes(String(wanted)));
            if (hit) props.onSelect(hit.index);
          }}
        >
          <input
            name="node"
            placeholder="find node id"
            aria-label="find node by id"
            data-testid="graph-find"
          />
        </form>
        <span class="muted small">
          {nodes.length} nodes · {layout.edges.length} edges · laid out by {layout.engine}
          {drawAll ? '' : ` · ${shown.length} in view`} · drag to pan, wheel to zoom
          {error ? ` · elkjs failed (${error})` : ''}
        </span>
      </div>
      <div
        class="graph-frame"
        ref={frame}
        onWheel={(e) => {
          e.preventDefault();
          const rect = (e.currentTarget as HTMLElement).getBoundingClientRect();
          zoom(e.deltaY < 0 ? 1.15 : 1 / 1.15, e.clientX - rect.left, e.clientY - rect.top);
        }}
        onPointerDown={(e) => {
          if ((e.target as Element).closest('.gnode')) return;
          drag.current = { x: e.clientX, y: e.clientY, view };
          (e.currentTarget as HTMLElement).setPointerCapture(e.pointerId);
        }}
        onPointerMove={(e) => {
          const d = drag.current;
          if (d) setView({ ...d.view, x: d.view.x + e.clientX - d.x, y: d.view.y + e.clientY - d.y });
        }}
        onPointerUp={() => {
          drag.current = null;
        }}
      >
        <svg width="100%" height={frameH} data-testid="graph-svg" aria-label="workflow graph" role="group">
          <defs>
            <marker
              id="arrow"
              viewBox="0 0 10 10"
              refX="9"
              refY="5"
              markerWidth="7"
              markerHeight="7"
              orient="auto"
            >
              <path d="M0,0 L10,5 L0,10 z" class="garrow" />
            </marker>
          </defs>
          <g transform={`translate(${view.x},${view.y}) scale(${view.k})`}>
            <g class="gedges">
              {edges.map((e) => (
                <polyline
                  key={`${e.from}>${e.to}`}
                  points={e.points.map((p) => p.join(',')).join(' ')}
                  data-from={byIndex.get(e.from)?.id}
                  data-to={byIndex.get(e.to)?.id}
                  class={`gedge${props.selected === e.to || props.selected === e.from ? ' hot' : ''}`}
                  marker-end="url(#arrow)"
                />
              ))}
            </g>
            {shown.map((n) => {
              const b = layout.boxes.get(n.index)!;
              return (
                <NodeShape
                  key={n.index}
                  node={n}
                  x={b.x}
                  y={b.y}
                  text={text}
                  selected={props.selected === n.index}
                  onSelect={props.onSelect}
                />
              );
            })}
          </g>
        </svg>
      </div>
    </div>
  );
}
