/**
 * Exact capacity caps: a cluster-wide cap over all queues and a `maxConcurrency` per queue. A capped claim runs
 * in one transaction under the cap's advisory lock (the cluster lock when a cluster cap is set, else the queue's
 * lock), counts what is in flight with a snapshot taken after the lock, and claims at most the room left; so no
 * interleaving of claimers can pass a cap. Queues without a cap, in an app without a cluster cap, never lock.
 *
 * Modes: `hard` (default) counts CLAIMED and RUNNING tasks; `soft` lets claims run `prefetchBuffer` over the cap
 * (tasks held ready) and gates the start instead, under the same lock, so RUNNING never passes the cap. Either
 * way a claim whose lease expired (a dead worker's) no longer counts.
 */
import type { Database, Queryable } from '../db/Database.js';
import { CapLock, CapUsage } from '../db/capacity.js';
import type { CapUsageRow } from '../db/capacity.js';

/** Cap settings, from the app config. */
export interface CapSettings {
  clusterWideCap: number | null;
  mode: 'hard' | 'soft';
  prefetchBuffer: number;
  /** `maxConcurrency` of the queues that set one. */
  queueCaps: ReadonlyMap<string, number>;
}

/** Applies the caps of one app. */
export class CapGuard {
  constructor(
    private readonly db: Database,
    private readonly settings: CapSettings,
  ) {}

  /** True when claims from `queue` must go through the lock. */
  applies(queue: string): boolean {
    return this.settings.clusterWideCap !== null || this.settings.queueCaps.has(queue);
  }

  /** True when starts must be gated (soft mode with a cap on the queue). */
  gatesStart(queue: string): boolean {
    return this.settings.mode === 'soft' && this.applies(queue);
  }

  /** Claims up to `limit` from `queue` within the caps; `claim` runs the claim statement on the locked connection. */
  claimWithin<R>(
    queue: string,
    limit: number,
    claim: (on: Queryable, limit: number) => Promise<R[]>,
  ): Promise<R[]> {
    const buffer = this.settings.mode === 'soft' ? this.settings.prefetchBuffer : 0;
    return this.locked(queue, async (on, usage) => {
      const room = Math.min(limit, this.room(queue, usage, 'in_flight', buffer));
      return room > 0 ? claim(on, room) : [];
    });
  }

  /** Soft mode: starts at most as many of `count` tasks of `queue` as the caps leave room to run. */
  startWithin<R>(
    queue: string,
    count: number,
    start: (on: Queryable, room: number) => Promise<R>,
  ): Promise<R> {
    return this.locked(queue, (on, usage) =>
      start(on, Math.max(0, Math.min(count, this.room(queue, usage, 'running', 0)))),
    );
  }

  private room(queue: string, usage: CapUsageRow, counted: 'in_flight' | 'running', extra: number): number {
    let room = Number.POSITIVE_INFINITY;
    const { clusterWideCap, queueCaps } = this.settings;
    if (clusterWideCap !== null) {
      room = Math.min(
        room,
        clusterWideCap + extra - (counted === 'in_flight' ? usage.cluster_in_flight : usage.cluster_running),
      );
    }
    const queueCap = queueCaps.get(queue);
    if (queueCap !== undefined) {
      room = Math.min(
        room,
        queueCap + extra - (counted === 'in_flight' ? usage.queue_in_flight : usage.queue_running),
      );
    }
    return room;
  }

  private locked<T>(queue: string, fn: (on: Queryable, usage: CapUsageRow) => Promise<T>): Promise<T> {
    const key =
      this.settings.clusterWideCap !== null
        ? `horsies.cap.${this.db.schema}`
        : `horsies.cap.${this.db.schema}.${queue}`;
    return this.db.transaction(async (client) => {
      await this.db.run(CapLock, { key }, client);
      const [usage] = await this.db.run(CapUsage, { queue }, client);
      return fn(client, usage!);
    });
  }
}
