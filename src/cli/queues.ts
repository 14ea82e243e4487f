/** `horsies queues ...`: counts per queue, pause and resume. */
import type { Command } from 'commander';
import { isKnownQueue } from '../client/operations.js';
import type { App } from '../client/App.js';
import { GroupLimitList, RateLimiterList } from '../db/flow.js';
import { HorsiesError } from '../errors.js';
import type { GroupLimitRow, RateLimiterRow } from '../db/flow.js';
import { formatTable } from './format.js';
import { withApp, withConnection } from './shared.js';
import type { ConnectionOptions } from './shared.js';

/** Adds `queues list|pause|resume` to the program. */
export function addQueueCommands(program: Command): void {
  const queues = program.command('queues').description('inspect, pause and resume queues');

  withConnection(queues.command('list'))
    .description(
      'counts by status per queue, paused queues, PENDING tasks no live worker serves, rate limiters and group limits',
    )
    .option('--json', 'print JSON lines instead of a table')
    .action(async (options: ConnectionOptions & { json?: boolean }) => {
      await withApp(options, async (app) => {
        const rows = await app.listQueues();
        const limiters = await app.db.run(RateLimiterList, { keys: null });
        const groups = await app.db.run(GroupLimitList, {});
        if (options.json) {
          for (const row of rows) {
            const limiter = limiters.find((l) => l.limiter_key === `queue:${row.queue}`);
            const group = groups.find((g) => g.queue_name === row.queue);
            console.log(
              JSON.stringify({
                ...row,
                rateLimit: limiter ? limiterJson(limiter) : null,
                groupLimit: group ? groupJson(group) : null,
              }),
            );
          }
          return;
        }
        if (rows.length === 0) {
          console.log('no queues with tasks yet');
          return;
        }
        console.log(
          formatTable(
            rows.map((q) => ({
              queue: q.queue,
              state: q.paused ? 'paused' : 'active',
              pending: String(q.counts.PENDING),
              'no worker': String(q.noWorker),
              claimed: String(q.counts.CLAIMED),
              running: String(q.counts.RUNNING),
              completed: String(q.counts.COMPLETED),
              failed: String(q.counts.FAILED),
              cancelled: String(q.counts.CANCELLED),
              expired: String(q.counts.EXPIRED),
            })),
          ),
        );
        printFlowLimits(limiters, groups);
      });
    });

  withConnection(queues.command('pause'))
    .description('stop claiming from a queue, cluster-wide (running tasks finish)')
    .argument('<queue>', 'queue name')
    .option('--force', 'pause a queue that no task, stored state or live worker names yet')
    .action(async (queue: string, options: ConnectionOptions & { force?: boolean }) => {
      await withApp(options, async (app) => {
        if (!options.force)
          await refuseUnknown(app, queue, 'paused', ' (pass --force to pause it before its first task)');
        await app.pauseQueue(queue);
        console.log(`queue ${queue} paused`);
      });
    });

  withConnection(queues.command('resume'))
    .description('resume a paused queue')
    .argument('<queue>', 'queue name')
    .action(async (queue: string, options: ConnectionOptions) => {
      await withApp(options, async (app) => {
        await refuseUnknown(app, queue, 'resumed', '');
        await app.resumeQueue(queue);
        console.log(`queue ${queue} resumed`);
      });
    });
}

/**
 * A queue name nothing knows is most likely a typo: pausing it would print success, change nothing that runs,
 * and store a stray row. Refused, with the nearest known name.
 */
async function refuseUnknown(app: App, queue: string, what: string, hint: string): Promise<void> {
  if (await isKnownQueue(app.db, queue)) return;
  const known = (await app.listQueues()).map((q) => q.queue);
  const near = known
    .filter((k) => editDistance(k, queue) <= 2)
    .sort((a, b) => editDistance(a, queue) - editDistance(b, queue))[0];
  throw new HorsiesError(
    'UNKNOWN_QUEUE',
    `no queue "${queue}": no task, stored state or live worker names it` +
      (near ? `; did you mean "${near}"?` : '') +
      ` (known: ${known.join(', ') || 'none'}). Nothing was ${what}${hint}`,
  );
}

// Edits from one name to the other, a swap of two neighbours counting as one (optimal string alignment).
function editDistance(a: string, b: string): number {
  const d = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  const at = (i: number, j: number): number => d[i]?.[j] ?? 0;
  for (let i = 1; i <= a.length; i += 1) {
    for (let j = 1; j <= b.length; j += 1) {
      let best = Math.min(
        at(i - 1, j) + 1,
        at(i, j - 1) + 1,
        at(i - 1, j - 1) + (a[i - 1] === b[j - 1] ? 0 : 1),
      );
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        best = Math.min(best, at(i - 2, j - 2) + 1);
      (d[i] as number[])[j] = best;
    }
  }
  return at(a.length, b.length);
}

// Rate limiters and group limits as the workers last used them (rows appear once a worker starts or claims under
// them).
function printFlowLimits(limiters: RateLimiterRow[], groups: GroupLimitRow[]): void {
  const now = Date.now();
  if (limiters.length > 0) {
    console.log('');
    console.log(
      formatTable(
        limiters.map((l) => ({
          'rate limiter': l.limiter_key,
          limit: `${l.max_starts} per ${l.interval_ms} ms`,
          'started in window': String(l.used),
          state:
            l.paused_until !== null && l.paused_until.getTime() > now
              ? `paused until ${l.paused_until.toISOString()}`
              : l.free_at.getTime() > now
                ? `full until ${l.free_at.toISOString()}`
                : 'open',
        })),
      ),
    );
  }
  if (groups.length > 0) {
    console.log('');
    console.log(
      formatTable(
        groups.map((g) => ({
          'group limit': g.queue_name,
          'per group': String(g.group_limit),
          'groups in flight': String(g.busy_groups),
          'at the limit': String(g.full_groups),
        })),
      ),
    );
  }
}

function limiterJson(l: RateLimiterRow) {
  return {
    max: l.max_starts,
    intervalMs: l.interval_ms,
    used: l.used,
    pausedUntil: l.paused_until,
    freeAt: l.free_at,
  };
}

function groupJson(g: GroupLimitRow) {
  return { perGroup: g.group_limit, groupsInFlight: g.busy_groups, groupsAtLimit: g.full_groups };
}
