/**
 * The pieces a worker that starts tasks ahead builds on: handler slots handed over in order (also when a waiter is
 * stopped as its slot comes), the hold limit, and the prefetch size of a burst that follows an idle spell.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { HandlerSlots } from '../../src/worker/HandlerSlots.js';
import { PrefetchSizer } from '../../src/worker/PrefetchSizer.js';

afterEach(() => {
  vi.useRealTimers();
});

describe('HandlerSlots', () => {
  it('hands slots over in order, and a waiter withdrawn after its slot came passes it on', async () => {
    const slots = new HandlerSlots(1, 0, () => undefined);
    expect(slots.take('a')).toBeNull();
    const order: string[] = [];
    const b = slots.take('b')!.then(() => order.push('b'));
    const c = slots.take('c')!.then(() => order.push('c'));
    const d = slots.take('d')!.then(() => order.push('d'));
    expect(slots.waitingIds()).toEqual(['b', 'c', 'd']);
    // c is stopped while it waits: it leaves the line without a slot.
    slots.withdraw('c');
    slots.release(); // a ends: b's turn
    await b;
    // b's slot was handed over, but b was stopped in the same turn: the slot goes on to d.
    slots.withdraw('b');
    await d;
    expect(order).toEqual(['b', 'd']);
    expect(slots.waiting).toBe(0);
    // d holds the one slot; when it ends, the next taker gets it at once.
    slots.release();
    expect(slots.take('e')).toBeNull();
    expect(slots.take('f')).not.toBeNull();
    void c;
  });

  it('reports the runs that waited holdMs, oldest first, and not those that got a slot', () => {
    vi.useFakeTimers();
    const held: string[][] = [];
    const slots = new HandlerSlots(1, 100, (ids) => held.push(ids));
    slots.take('a');
    void slots.take('b');
    vi.advanceTimersByTime(50);
    void slots.take('c');
    slots.release(); // b gets the slot before its hold ran out
    vi.advanceTimersByTime(60);
    expect(held).toEqual([]);
    vi.advanceTimersByTime(50);
    expect(held).toEqual([['c']]);
    slots.close();
  });
});

describe('PrefetchSizer', () => {
  it('sizes a burst after an idle spell from its own rate within a tenth of a second', () => {
    vi.useFakeTimers();
    const sizer = new PrefetchSizer(20, 490);
    vi.advanceTimersByTime(60_000);
    // 10 runs per ms for 100 ms: 10,000 runs/s, 200 of them within a 20 ms window.
    for (let ms = 0; ms < 100; ms += 1) {
      sizer.ran(10);
      vi.advanceTimersByTime(1);
    }
    expect(sizer.size()).toBeGreaterThan(180);
    expect(sizer.size()).toBeLessThanOrEqual(210);
  });

  it('holds nothing ahead for a handful of long runs, and caps what it holds', () => {
    vi.useFakeTimers();
    const sizer = new PrefetchSizer(20, 50);
    // Ten runs of a second each end together, then ten more a second later.
    sizer.ran(10);
    expect(sizer.size()).toBeLessThanOrEqual(2);
    vi.advanceTimersByTime(1_000);
    sizer.ran(10);
    expect(sizer.size()).toBe(0);
    for (let ms = 0; ms < 1_000; ms += 1) {
      sizer.ran(100);
      vi.advanceTimersByTime(1);
    }
    expect(sizer.size()).toBe(50);
  });
});
