/** `horsies queues ...`: counts per queue, pause and resume. */
import type { Command } from 'commander';
import { formatTable } from './format.js';
import { withApp, withConnection } from './shared.js';
import type { ConnectionOptions } from './shared.js';

/** Adds `queues list|pause|resume` to the program. */
export function addQueueCommands(program: Command): void {
  const queues = program.command('queues').description('inspect, pause and resume queues');

  withConnection(queues.command('list'))
    .description('counts by status per queue, paused queues, and PENDING tasks no live worker serves')
    .option('--json', 'print JSON lines instead of a table')
    .action(async (options: ConnectionOptions & { json?: boolean }) => {
      await withApp(options, async (app) => {
        const rows = await app.listQueues();
        if (options.json) {
          for (const row of rows) console.log(JSON.stringify(row));
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
