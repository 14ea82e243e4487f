/**
 * Exact capacity caps: a cluster-wide cap over all queues and a `maxConcurrency` per queue. A capped claim takes
 * the cap's advisory lock (the cluster lock when a cluster cap is set, else the queue's lock), counts what is in
 * flight with a snapshot taken after the lock, and claims at most the room left, in one statement whose commit
 * releases the lock; so no interleaving of claimers can pass a cap. Queues without a cap, in an app without a
 * cluster cap, never lock.
 *
 * Modes: `hard` (default) counts CLAIMED and RUNNING tasks; `soft` lets claims run `prefetchBuffer` over the cap
 * (tasks held ready) and gates the start instead, under the same lock, so RUNNING never passes the cap. Either
 * way a claim whose lease expired (a dead worker's) no longer counts.
 */
import type { ResolvedAppConfig } from '../client/config.js';
import type { Database, Queryable } from '../db/Database.js';
import { CapRoom } from '../db/capacity.js';
import type { CapLimits } from '../db/capacity.js';

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
  /** The cap settings of an app config. */
  static settingsOf(
    app: Pick<ResolvedAppConfig, 'queueConfigs' | 'clusterWideCap' | 'capMode' | 'prefetchBuffer'>,
  ): CapSettings {
    const queueCaps = new Map<string, number>();
    for (const q of app.queueConfigs.values())
      if (q.maxConcurrency !== undefined) queueCaps.set(q.name, q.maxConcurrency);
    return {
      clusterWideCap: app.clusterWideCap ?? null,
      mode: app.capMode,
      prefetchBuffer: app.prefetchBuffer,
      queueCaps,
    };
  }

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

  /**
   * Claims up to `limit` from `queue` within the caps, with a claim of more than one statement: a transaction takes
   * the cap's lock and counts the room (`CapRoom`), then `claim` runs on its connection with the room left. Returns
   * the claimed rows and the room the count found.
   */
  claimWithin<R>(
    queue: string,
    limit: number,
    claim: (on: Queryable, limit: number) => Promise<R[]>,
  ): Promise<{ rows: R[]; room: number }> {
    return this.db.transaction(async (client) => {
      const [row] = await this.db.run(
        CapRoom,
        { ...this.limits(queue, 'claim'), queue, running: false },
        client,
      );
      const room = row!.room;
      const take = Math.min(limit, room);
      return { rows: take > 0 ? await claim(client, take) : [], room };
    });
  }

  /**
   * The caps of `queue` for a statement that counts its room itself (`TaskClaimWithinCap`, `TaskStartWithinCap`,
   * `CapRoom`): a claim may hold the soft mode's buffer beyond them, a start may not.
   */
  limits(queue: string, what: 'claim' | 'start'): CapLimits {
    const { clusterWideCap, queueCaps, mode, prefetchBuffer } = this.settings;
    return {
      // One lock for every capped claim of the app with a cluster cap, otherwise one per capped queue.
      key:
        clusterWideCap !== null ? `horsies.cap.${this.db.schema}` : `horsies.cap.${this.db.schema}.${queue}`,
      clusterCap: clusterWideCap,
      queueCap: queueCaps.get(queue) ?? null,
      extra: what === 'claim' && mode === 'soft' ? prefetchBuffer : 0,
    };
  }
}
