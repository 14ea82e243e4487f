/** Turns samples into tables: one per scenario, each figure as median (min–max), horsies against the best peer. */
import type { Column, Row, Scenario } from './scenarios/types.js';
import { spread } from './stats.js';
import type { Spread } from './stats.js';

/** One sample as recorded in the JSON. */
export interface SampleRecord {
  scenario: string;
  case: string;
  row: string;
  subject: string;
  round: number;
  values?: Record<string, number>;
  skipped?: string;
  error?: string;
  timeout?: boolean;
  durationMs: number;
  /** The machine's 1-minute load average when the sample started (other work on it shows here). */
  loadAverage: number;
  raw?: unknown;
}

export interface CellSummary {
  spread: Spread | null;
  failed: number;
  skipped: string | null;
  errors: string[];
}

export interface RatioSummary {
  row: string;
  column: string;
  ratio: number;
  best: string;
}

export interface ScenarioSummary {
  cells: Record<string, Record<string, CellSummary>>;
  ratios: RatioSummary[];
}

export function summarize(scenario: Scenario, columns: Column[], rows: Row[], samples: SampleRecord[]) {
  const cells: ScenarioSummary['cells'] = {};
  for (const row of rows) {
    const mine = samples.filter((s) => s.scenario === scenario.name && s.row === row.id);
    cells[row.id] = {};
    for (const column of columns) {
      const relevant = mine.filter((s) => s.values === undefined || column.key in s.values);
      const values = relevant.flatMap((s) =>
        s.values?.[column.key] !== undefined ? [s.values[column.key]!] : [],
      );
      const failures = relevant.filter((s) => s.error !== undefined);
      const skipped = relevant.find((s) => s.skipped !== undefined)?.skipped ?? null;
      cells[row.id]![column.key] = {
        spread: spread(values),
        failed: failures.length,
        skipped: values.length === 0 ? skipped : null,
        errors: [...new Set(failures.map((f) => f.error as string))],
      };
    }
  }
  const ratios: RatioSummary[] = [];
  for (const row of rows.filter((r) => r.subject.isHorsies)) {
    for (const column of columns) {
      const own = cells[row.id]?.[column.key]?.spread;
      let best: { row: string; median: number } | null = null;
      for (const other of rows.filter((r) => !r.subject.isHorsies && !r.subject.baseline)) {
        const median = cells[other.id]?.[column.key]?.spread?.median;
        if (median === undefined) continue;
        const better =
          column.better === 'higher'
            ? median > (best?.median ?? -Infinity)
            : median < (best?.median ?? Infinity);
        if (better) best = { row: other.id, median };
      }
      if (own && best && best.median !== 0) {
        ratios.push({ row: row.id, column: column.key, ratio: own.median / best.median, best: best.row });
      }
    }
  }
  return { cells, ratios } satisfies ScenarioSummary;
}

function formatNumber(value: number, decimals: number): string {
  return value.toLocaleString('en-US', { minimumFractionDigits: decimals, maximumFractionDigits: decimals });
}

function formatCell(cell: CellSummary | undefined, column: Column, notes: string[], rowId: string): string {
  if (!cell) return '';
  const decimals = column.decimals ?? 0;
  const note = (text: string): string => {
    const entry = `${rowId}: ${text}`;
    if (!notes.includes(entry)) notes.push(entry);
    return `[${notes.indexOf(entry) + 1}]`;
  };
  if (cell.spread) {
    const { median, min, max, n } = cell.spread;
    let text = formatNumber(median, decimals);
    if (n > 1) text += ` (${formatNumber(min, decimals)}–${formatNumber(max, decimals)})`;
    if (cell.failed > 0) text += ` + ${cell.failed} failed ${note(cell.errors.join('; '))}`;
    return text;
  }
  if (cell.skipped) return `skipped ${note(cell.skipped)}`;
  if (cell.failed > 0) {
    const kind = cell.errors.every((e) => e.startsWith('timeout')) ? 'timeout' : 'error';
    return `${kind} ${note(cell.errors.join('; '))}`;
  }
  return '—'; // not measured for this subject (e.g. lock waits of a peer that keeps nothing in PostgreSQL)
}

/** A Markdown table (readable as plain text too) with the notes it refers to underneath. */
export function renderTable(columns: Column[], rows: Row[], summary: ScenarioSummary): string {
  const notes: string[] = [];
  const header = ['subject', ...columns.map((c) => (c.unit ? `${c.label} (${c.unit})` : c.label))];
  const body = rows.map((row) => [
    row.id,
    ...columns.map((column) => formatCell(summary.cells[row.id]?.[column.key], column, notes, row.id)),
  ]);
  for (const row of rows.filter((r) => r.subject.isHorsies)) {
    body.push([
      `${row.id} vs best`,
      ...columns.map((column) => {
        const ratio = summary.ratios.find((r) => r.row === row.id && r.column === column.key);
        return ratio ? `${ratio.ratio.toFixed(2)}x best (${ratio.best})` : '—';
      }),
    ]);
  }
  // Against each baseline in the table: a plain ratio of the medians.
  for (const row of rows.filter((r) => r.subject.isHorsies)) {
    for (const baseline of rows.filter((r) => r.subject.baseline)) {
      body.push([
        `${row.id} vs ${baseline.id}`,
        ...columns.map((column) => {
          const own = summary.cells[row.id]?.[column.key]?.spread?.median;
          const base = summary.cells[baseline.id]?.[column.key]?.spread?.median;
          return own !== undefined && base ? `${(own / base).toFixed(2)}x` : '—';
        }),
      ]);
    }
  }
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((line) => (line[i] ?? '').length)));
  const line = (cells: string[]): string =>
    `| ${cells.map((cell, i) => cell.padEnd(widths[i] ?? 0)).join(' | ')} |`;
  const out = [line(header), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...body.map(line)];
  if (notes.length > 0) out.push('', ...notes.map((n, i) => `[${i + 1}] ${n}`));
  return out.join('\n');
}

/** The table's heading: title, unit and direction. */
export function tableTitle(scenario: Scenario, columns: Column[]): string {
  const better = columns[0]?.better === 'lower' ? 'lower' : 'higher';
  return `${scenario.title} (${scenario.unit}, ${better} is better)`;
}
