/**
 * Chooses each queue's claim strategy once, when the worker is built: `limited` where a rate limiter or a group
 * limit applies (within the cap, if the queue has one too), `capped` where only a cap does, `plain` elsewhere (one
 * instance for every plain queue, so that their prefetched tasks start together in one statement).
 */
import type { Database } from '../../db/Database.js';
import type { CapGuard } from '../CapGuard.js';
import type { DoneNotices } from '../DoneNotices.js';
import type { FlowGuard } from '../FlowGuard.js';
import { CappedClaim } from './CappedClaim.js';
import type { ClaimStrategies, ClaimStrategy } from './ClaimStrategy.js';
import { LimitedClaim } from './LimitedClaim.js';
import { PlainClaim } from './PlainClaim.js';
import type { StrategySettings } from './PlainClaim.js';

/** What the strategies of a worker are made of. */
export interface StrategyParts {
  db: Database;
  /** Every queue the worker may see tasks of (its own, and the app's). */
  queues: Iterable<string>;
  caps: CapGuard;
  flow: FlowGuard;
  /** task_done notifications the plain and capped claims carry. */
  notices: DoneNotices | null;
}

/** The strategies of the queues of `parts`. */
export function claimStrategies(parts: StrategyParts, settings: StrategySettings): ClaimStrategies {
  const { db, caps, flow, notices } = parts;
  const plain = new PlainClaim(db, settings, notices);
  const byQueue = new Map<string, ClaimStrategy>();
  for (const queue of parts.queues) {
    if (byQueue.has(queue)) continue;
    byQueue.set(
      queue,
      flow.applies(queue)
        ? new LimitedClaim(db, settings, flow, caps, queue)
        : caps.applies(queue)
          ? new CappedClaim(db, settings, caps, queue, notices)
          : plain,
    );
  }
  return {
    // A queue nothing declared (a task's queue the app config does not list) is metered by the cluster cap alone.
    of: (queue) => byQueue.get(queue) ?? (caps.applies(queue) ? remember(queue) : plain),
    all: () => [...new Set([plain, ...byQueue.values()])],
  };

  function remember(queue: string): ClaimStrategy {
    const strategy = new CappedClaim(db, settings, caps, queue, notices);
    byQueue.set(queue, strategy);
    return strategy;
  }
}
