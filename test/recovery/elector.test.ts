/** Leader election through the lease row: exactly one leader, takeover when it lapses or resigns. */
import { afterEach, describe, expect, it } from 'vitest';
import { Elector } from '../../src/recovery/Elector.js';
import { testLogger, useTestSchema, waitForEvent } from '../support/db.js';
import { createWorker } from '../../src/worker/Worker.js';

const t = await useTestSchema();
const electors: Elector[] = [];
afterEach(async () => {
  await Promise.all(electors.splice(0).map((e) => e.stop()));
  await t.query('DELETE FROM {{schema}}.horsies_leaders');
});

function elector(id: string, ttlMs = 300): Elector {
  const e = new Elector(t.app().db, { name: 'maintenance', candidateId: id, ttlMs }, testLogger);
  electors.push(e);
  return e;
}

describe('Elector', () => {
  it('elects exactly one of several candidates starting together', async () => {
    const candidates = Array.from({ length: 8 }, (_, i) => elector(`candidate-${i}`));
    const outcomes = await Promise.all(candidates.map((c) => c.runOnce()));
    expect(outcomes.filter(Boolean)).toHaveLength(1);
    const [row] = await t.query<{ leader_id: string }>('SELECT leader_id FROM {{schema}}.horsies_leaders');
    expect(row?.leader_id).toBe(`candidate-${outcomes.indexOf(true)}`);
    // Renewing keeps the same leader; the others still lose.
    const again = await Promise.all(candidates.map((c) => c.runOnce()));
    expect(again).toEqual(outcomes);
  });

  it('hands over when the leader stops renewing and its lease lapses', async () => {
    const first = elector('first');
    const second = elector('second');
    expect(await first.runOnce()).toBe(true);
    expect(await second.runOnce()).toBe(false);
    // The first leader goes silent (no timer running); the second campaigns on a timer and takes over.
    const elected = waitForEvent(second, 'leader:elected', () => true, 5_000);
    const started = Date.now();
    second.start();
    await elected;
    expect(Date.now() - started).toBeGreaterThanOrEqual(150);
    // The old leader learns it lost on its next attempt.
    const lost = waitForEvent(first, 'leader:lost');
    expect(await first.runOnce()).toBe(false);
    await lost;
  });

  it('lets another candidate take over at once after a resign', async () => {
    const first = elector('first', 60_000);
    const second = elector('second', 60_000);
    expect(await first.runOnce()).toBe(true);
    expect(await second.runOnce()).toBe(false);
    await first.stop();
    expect(await second.runOnce()).toBe(true);
  });

  it('workers elect one maintenance leader among them', async () => {
    const apps = [1, 2, 3].map(() => t.app({ recovery: { checkIntervalMs: 300 } }));
    const workers = apps.map((app) => createWorker(app, { snapshotIntervalMs: 0 }));
    const elected = new Promise<void>((resolve) => {
      for (const w of workers) w.once('leader:elected', resolve);
    });
    await Promise.all(workers.map((w) => w.start()));
    await elected;
    expect(workers.filter((w) => w.isLeader)).toHaveLength(1);
    const leader = workers.find((w) => w.isLeader)!;
    const others = workers.filter((w) => w !== leader);
    const takeover = new Promise<void>((resolve) => {
      for (const w of others) w.once('leader:elected', resolve);
    });
    await leader.stop();
    await takeover;
    expect(others.filter((w) => w.isLeader)).toHaveLength(1);
    await Promise.all(others.map((w) => w.stop()));
  });
});
