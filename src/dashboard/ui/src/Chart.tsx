/** A uPlot time-series chart that follows its data. */
import type { JSX } from 'preact';
import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

/** One line of a chart. */
export interface Series {
  label: string;
  color: string;
  values: (number | null)[];
}

/** Draws `series` over `times` (seconds since the epoch). */
export function Chart(props: {
  title: string;
  times: number[];
  series: Series[];
  testid: string;
  unit?: string;
}): JSX.Element {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const labels = props.series.map((s) => s.label).join('|');
  useEffect(() => {
    if (!box.current) return;
    const opts: uPlot.Options = {
      width: Math.max(300, box.current.clientWidth),
      height: 180,
      series: [
        {},
        ...props.series.map((s) => ({
          label: s.label,
          stroke: s.color,
          width: 2,
          points: { show: true, size: 4 },
          fill: `${s.color}22`,
          value: (_u: uPlot, v: number | null) => (v === null ? '–' : `${v}${props.unit ?? ''}`),
        })),
      ],
      axes: [{}, { size: 50 }],
      scales: { y: { range: (_u, _min, max) => [0, Math.max(1, max)] } },
    };
    plot.current = new uPlot(opts, [props.times, ...props.series.map((s) => s.values)], box.current);
    const onResize = (): void => {
      if (box.current && plot.current)
        plot.current.setSize({ width: Math.max(300, box.current.clientWidth), height: 180 });
    };
    addEventListener('resize', onResize);
    return () => {
      removeEventListener('resize', onResize);
      plot.current?.destroy();
      plot.current = null;
    };
    // The chart is rebuilt only when its series change; data changes go through setData below.
  }, [labels]);
  useEffect(() => {
    plot.current?.setData([props.times, ...props.series.map((s) => s.values)]);
  }, [props.times, props.series]);
  return (
    <figure class="chart" data-testid={props.testid}>
      <figcaption>{props.title}</figcaption>
      <div ref={box} />
    </figure>
  );
}
