/**
 * The soak's minutes as an SVG chart: six panels (throughput, send-to-start, the two tables' sizes, dead rows,
 * WAL), each with its own scale from zero, and dashed lines where the thirds the plateau verdict compares begin.
 * Plain SVG, no dependency. `tsx scripts/soak/chart.ts soak.jsonl soak.svg` draws the chart of a JSON-lines file.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { judgePlateau, type Minute, type Verdict } from './plateau.js';

interface Line {
  label: string;
  color: string;
  value: (m: Minute) => number | null;
}

interface Panel {
  title: string;
  lines: Line[];
}

const MiB = 1_048_576;
const BLUE = '#1f77b4';
const ORANGE = '#ff7f0e';
const GREEN = '#2ca02c';
const RED = '#d62728';

const PANELS: Panel[] = [
  {
    title: 'tasks per minute',
    lines: [
      { label: 'completed', color: BLUE, value: (m) => m.completed },
      { label: 'sent', color: ORANGE, value: (m) => m.sent },
    ],
  },
  {
    title: 'send-to-start (ms)',
    lines: [
      { label: 'p50', color: BLUE, value: (m) => m.p50Ms },
      { label: 'p99', color: RED, value: (m) => m.p99Ms },
    ],
  },
  {
    title: 'task table (MiB)',
    lines: [
      { label: 'total', color: BLUE, value: (m) => m.tasks.bytes / MiB },
      { label: 'indexes', color: GREEN, value: (m) => m.tasks.indexBytes / MiB },
    ],
  },
  {
    title: 'attempt table (MiB)',
    lines: [
      { label: 'total', color: BLUE, value: (m) => m.attempts.bytes / MiB },
      { label: 'indexes', color: GREEN, value: (m) => m.attempts.indexBytes / MiB },
    ],
  },
  {
    title: 'dead rows',
    lines: [
      { label: 'tasks', color: BLUE, value: (m) => m.tasks.dead },
      { label: 'attempts', color: ORANGE, value: (m) => m.attempts.dead },
    ],
  },
  {
    title: 'WAL per minute (MiB)',
    lines: [{ label: 'WAL', color: BLUE, value: (m) => m.walBytes / MiB }],
  },
];

const W = 380;
const H = 190;
const PAD = { left: 52, right: 12, top: 26, bottom: 28 };
const esc = (s: string): string => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

function tick(v: number): string {
  if (v === 0) return '0';
  if (v >= 10_000) return `${Math.round(v / 1000)}k`;
  if (v >= 100) return String(Math.round(v));
  return v.toFixed(v >= 10 ? 0 : 1);
}

function panel(p: Panel, minutes: Minute[], x0: number, y0: number): string {
  const n = minutes.length;
  const values = p.lines.flatMap((l) => minutes.map(l.value).filter((v): v is number => v !== null));
  const max = Math.max(1e-9, ...values) * 1.05;
  const pw = W - PAD.left - PAD.right;
  const ph = H - PAD.top - PAD.bottom;
  const x = (i: number): number => x0 + PAD.left + (n <= 1 ? pw / 2 : (i / (n - 1)) * pw);
  const y = (v: number): number => y0 + PAD.top + ph - (v / max) * ph;
  const out: string[] = [
    `<text x="${x0 + PAD.left}" y="${y0 + 16}" font-weight="bold">${esc(p.title)}</text>`,
    `<rect x="${x0 + PAD.left}" y="${y0 + PAD.top}" width="${pw}" height="${ph}" fill="none" stroke="#ccc"/>`,
  ];
  for (const f of [0, 0.5, 1]) {
    const v = (max / 1.05) * f;
    out.push(
      `<text x="${x0 + PAD.left - 4}" y="${(y(v) + 4).toFixed(1)}" text-anchor="end" fill="#555">${tick(v)}</text>`,
    );
  }
  out.push(
    `<text x="${x(0)}" y="${y0 + H - 10}" text-anchor="middle" fill="#555">1</text>`,
    `<text x="${x(n - 1)}" y="${y0 + H - 10}" text-anchor="end" fill="#555">${n} min</text>`,
  );
  // Where the middle and last thirds begin.
  if (n >= 6) {
    for (const i of [Math.floor(n / 3), Math.floor((2 * n) / 3)]) {
      out.push(
        `<line x1="${x(i)}" y1="${y0 + PAD.top}" x2="${x(i)}" y2="${y0 + PAD.top + ph}" stroke="#999" stroke-dasharray="3,3"/>`,
      );
    }
  }
  p.lines.forEach((l, k) => {
    const points = minutes
      .map((m, i) => [i, l.value(m)] as const)
      .filter((pt): pt is readonly [number, number] => pt[1] !== null)
      .map(([i, v]) => `${x(i).toFixed(1)},${y(v).toFixed(1)}`);
    if (points.length === 1) {
      const [cx, cy] = points[0]!.split(',');
      out.push(`<circle cx="${cx}" cy="${cy}" r="2.5" fill="${l.color}"/>`);
    } else if (points.length > 1) {
      out.push(`<polyline fill="none" stroke="${l.color}" stroke-width="1.5" points="${points.join(' ')}"/>`);
    }
    const lx = x0 + W - PAD.right - 85 * (p.lines.length - k);
    out.push(
      `<line x1="${lx}" y1="${y0 + 12}" x2="${lx + 14}" y2="${y0 + 12}" stroke="${l.color}" stroke-width="2"/>`,
      `<text x="${lx + 18}" y="${y0 + 16}">${esc(l.label)}</text>`,
    );
  });
  return out.join('\n');
}

/** The chart of `minutes`, with the verdict as its caption. */
export function drawChart(minutes: Minute[], verdict: Verdict): string {
  const cols = 2;
  const rows = Math.ceil(PANELS.length / cols);
  const width = cols * W;
  const height = rows * H + 30;
  const body = PANELS.map((p, i) => panel(p, minutes, (i % cols) * W, 30 + Math.floor(i / cols) * H));
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" ` +
      `font-family="sans-serif" font-size="11">`,
    `<rect width="100%" height="100%" fill="white"/>`,
    `<text x="10" y="20" font-size="13">${esc(`Soak, ${minutes.length} min: ${verdict.summary}`)}</text>`,
    ...body,
    '</svg>',
    '',
  ].join('\n');
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const [input, output] = process.argv.slice(2);
  if (!input || !output) {
    console.error('usage: tsx scripts/soak/chart.ts <minutes.jsonl> <chart.svg>');
    process.exit(2);
  }
  const minutes = readFileSync(input, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as Minute);
  writeFileSync(output, drawChart(minutes, judgePlateau(minutes)));
}
