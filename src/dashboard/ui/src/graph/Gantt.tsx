/**
 * A timeline (Gantt chart) in SVG: one row per span, a lighter bar while it was queued and a bar in its status'
 * colour while it ran, on one time axis, so the waits and the critical path show at a glance. Used for a
 * workflow run's nodes and for a task's attempts.
 */
import type { JSX } from 'preact';
import { duration } from '../format.js';

/** One row: times as ISO strings; a null end is still open (drawn up to `now`). */
export interface GanttRow {
  key: string;
  label: string;
  status: string;
  queuedAt: string | null;
  startedAt: string | null;
  finishedAt: string | null;
  href?: string;
}

const ROW_H = 20;
const LABEL_W = 200;
const PLOT_W = 760;

function ms(value: string | null): number | null {
  return value === null ? null : new Date(value).getTime();
}

export function Gantt(props: {
  rows: GanttRow[];
  now?: number;
  testid: string;
  caption: string;
}): JSX.Element {
  const now = props.now ?? Date.now();
  const times = props.rows.flatMap((r) => [ms(r.queuedAt), ms(r.startedAt), ms(r.finishedAt)]);
  const known = times.filter((t): t is number => t !== null);
  if (props.rows.length === 0 || known.length === 0) return <p class="muted">Nothing has started yet.</p>;
  const t0 = Math.min(...known);
  const t1 = Math.max(...known, ...props.rows.filter((r) => r.finishedAt === null).map(() => now));
  const span = Math.max(t1 - t0, 1);
  const x = (t: number): number => LABEL_W + ((t - t0) / span) * PLOT_W;
  const height = props.rows.length * ROW_H + 24;
  return (
    <figure class="gantt" data-testid={props.testid} tabIndex={0}>
      <figcaption class="muted small">
        {props.caption} · {duration(span)} from first to last · light: queued, solid: running
      </figcaption>
      <svg width={LABEL_W + PLOT_W + 40} height={height} role="img" aria-label={props.caption}>
        {[0, 0.25, 0.5, 0.75, 1].map((f) => (
          <g key={f}>
            <line class="gtick" x1={LABEL_W + f * PLOT_W} x2={LABEL_W + f * PLOT_W} y1={0} y2={height - 18} />
            <text class="gticktext" x={LABEL_W + f * PLOT_W} y={height - 4} text-anchor="middle">
              +{duration(f * span)}
            </text>
          </g>
        ))}
        {props.rows.map((r, i) => {
          const y = i * ROW_H;
          const queued = ms(r.queuedAt);
          const started = ms(r.startedAt);
          const finished = ms(r.finishedAt) ?? now;
          const runFrom = started ?? (r.finishedAt !== null ? finished : null);
          return (
            <g
              key={r.key}
              class={`grow g-${r.status.toLowerCase()}`}
              data-span={r.key}
              data-status={r.status}
              data-queued={r.queuedAt ?? undefined}
              data-started={r.startedAt ?? undefined}
              data-finished={r.finishedAt ?? undefined}
            >
              <title>
                {`${r.label} ${r.status}: queued ${r.queuedAt ?? '-'}, started ${r.startedAt ?? '-'}, finished ${
                  r.finishedAt ?? '-'
                }`}
              </title>
              <text class="glabel" x={LABEL_W - 6} y={y + 14} text-anchor="end">
                {r.label.length > 28 ? `${r.label.slice(0, 27)}…` : r.label}
              </text>
              {queued !== null ? (
                <rect
                  class="gqueued"
                  x={x(queued)}
                  y={y + 4}
                  width={Math.max(1, x(runFrom ?? finished) - x(queued))}
                  height={ROW_H - 8}
                />
              ) : null}
              {runFrom !== null ? (
                <rect
                  class="grun"
                  x={x(runFrom)}
                  y={y + 2}
                  width={Math.max(2, x(finished) - x(runFrom))}
                  height={ROW_H - 4}
                />
              ) : null}
            </g>
          );
        })}
      </svg>
    </figure>
  );
}
