/**
 * `prefetch: { size: 'auto' }`: a worker holds claimed tasks ahead of its slots only as many as it expects to start within
 * `prefetch.windowMs` at the rate its runs have been ending: many for short tasks, none for long ones.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { Worker } from '../../src/worker/Worker.js';
import { createWorker } from '../../src/worker/Worker.js';
import { drainWith, useTestSchema } from '../support/db.js';

const t = await useTestSchema();

/** Counts the tasks each claim took without starting them (held ahead). The claim's starts are announced in the same turn. */
function heldAhead(worker: Worker): { count: number; largestClaim: number } {
  const seen = { count: 0, largestClaim: 0 };
  const started = new Set<string>();
  worker.on('task:started', (id) => started.add(id));
  worker.on('task:claimed', (ids) => {
    seen.largestClaim = Math.max(seen.largestClaim, ids.length);
    queueMicrotask(() => (seen.count += ids.filter((id) => !started.has(id)).length));
  });
  return seen;
}

describe("prefetch.size: 'auto'", () => {
  it('claims ahead of its slots for short tasks', async () => {
    const app = t.app();
    const quick = app.task({ name: 'auto.quick', input: z.object({ i: z.number() }), handler: ({ i }) => i });
    const worker = createWorker(app, { concurrency: 2, prefetch: { size: 'auto', windowMs: 50 } });
    const seen = heldAhead(worker);
    await drainWith(worker, quick, 2_000);
    expect(seen.count).toBeGreaterThan(0);
    expect(seen.largestClaim).toBeGreaterThan(2);
  });

  it('holds nothing ahead for long tasks, so another worker can take what waits', async () => {
    const app = t.app();
    const slow = app.task({
      name: 'auto.slow',
      input: z.object({ i: z.number() }),
      handler: async ({ i }) => {
        await new Promise((resolve) => setTimeout(resolve, 100));
        return i;
      },
    });
    const worker = createWorker(app, { concurrency: 2, prefetch: { size: 'auto' } });
    const seen = heldAhead(worker);
    await drainWith(worker, slow, 10);
    expect(seen.count).toBe(0);
    expect(seen.largestClaim).toBeLessThanOrEqual(2);
  });
});
