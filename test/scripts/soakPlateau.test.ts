import { describe, expect, it } from 'vitest';
import { drawChart } from '../../scripts/soak/chart.js';
import { judgePlateau } from '../../scripts/soak/plateau.js';
import type { Minute } from '../../scripts/soak/plateau.js';

const MiB = 1_048_576;

/** A soak's minutes: sizes ramp up over the first 4 minutes, then hold (unless `grow` adds to them). */
function minutes(
  n: number,
  grow: (i: number) => Partial<{ tasks: number; p99: number }> = () => ({}),
): Minute[] {
  return Array.from({ length: n }, (_, i) => {
    const ramp = Math.min(1, (i + 1) / 4);
    const extra = grow(i);
    const table = (bytes: number) => ({
      bytes,
      indexBytes: bytes / 2,
      live: 1000,
      dead: 100,
      autovacuums: 0,
      vacuums: 1,
      deleted: 500,
    });
    return {
      minute: i + 1,
      at: new Date(Date.UTC(2026, 0, 1, 0, i + 1)).toISOString(),
      sent: 6000,
      completed: 6000,
      otherCompleted: 130,
      workflowsCompleted: 30,
      p50Ms: 8 + (i % 3),
      p99Ms: 60 + (i % 4) * 5 + (extra.p99 ?? 0),
      pending: 0,
      tasks: table(40 * MiB * ramp + (extra.tasks ?? 0)),
      attempts: table(15 * MiB * ramp),
      walBytes: 15 * MiB,
      workersCpuPct: 10,
      senderCpuPct: 3,
      sendLagMaxMs: 5,
    };
  });
}

describe('the soak plateau verdict', () => {
  it('finds a plateau when sizes stop growing after the ramp and latencies only wobble', () => {
    const verdict = judgePlateau(minutes(30));
    expect(verdict.judged).toBe(true);
    expect(verdict.series.filter((s) => !s.ok)).toEqual([]);
    expect(verdict.ok).toBe(true);
  });

  it('names a table that keeps growing through the last third', () => {
    const verdict = judgePlateau(minutes(30, (i) => ({ tasks: i * 2 * MiB })));
    expect(verdict.ok).toBe(false);
    // Its indexes are half of it here: they grow too.
    expect(verdict.series.filter((s) => !s.ok).map((s) => s.name)).toEqual([
      'tasks table size',
      'tasks index size',
    ]);
    expect(verdict.summary).toContain('tasks table size');
  });

  it('names a latency that climbs in the last third', () => {
    const verdict = judgePlateau(minutes(30, (i) => ({ p99: i >= 20 ? (i - 19) * 20 : 0 })));
    expect(verdict.series.filter((s) => !s.ok).map((s) => s.name)).toEqual(['send-to-start p99']);
  });

  it('counts growth under the floor as noise', () => {
    // Half a MiB over the last third: under the 1 MiB floor.
    const verdict = judgePlateau(minutes(30, (i) => ({ tasks: i >= 20 ? (i - 19) * 50_000 : 0 })));
    expect(verdict.ok).toBe(true);
  });

  it('does not judge fewer than 6 minutes', () => {
    const verdict = judgePlateau(minutes(5));
    expect(verdict.judged).toBe(false);
    expect(verdict.ok).toBe(false);
    expect(verdict.summary).toMatch(/too short/);
  });
});

describe('the soak chart', () => {
  it('draws one line per series and marks the thirds', () => {
    const ms = minutes(12);
    const svg = drawChart(ms, judgePlateau(ms));
    expect(svg.startsWith('<svg')).toBe(true);
    // Throughput 2, latency 2, tables 2 + 2, dead rows 2, WAL 1.
    expect(svg.match(/<polyline /g)).toHaveLength(11);
    // Two dashed lines (middle and last third) in each of the six panels.
    expect(svg.match(/stroke-dasharray/g)).toHaveLength(12);
    expect(svg).toContain('plateau');
  });
});
