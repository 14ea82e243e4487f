/** `horsies queues ...`: counts per queue, pause and resume. */
import type { Command } from 'commander';
import { GroupLimitList, RateLimiterList } from '../db/flow.js';
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

  for (const [name, paused] of [
    ['pause', true],
    ['resume', false],
  ] as const) {
    withConnection(queues.command(name))
      .description(
        paused ? 'stop claiming from a queue, cluster-wide (running tasks finish)' : 'resume a paused queue',
      )
      .argument('<queue>', 'queue name')
      .action(async (queue: string, options: ConnectionOptions) => {
        await withApp(options, async (app) => {
          await (paused ? app.pauseQueue(queue) : app.resumeQueue(queue));
          console.log(`queue ${queue} ${paused ? 'paused' : 'resumed'}`);
        });
      });
  }
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
