/**
 * Two tasks for tests of what a worker holds beyond a busy slot: `long` runs until `release()`, `quick` returns its
 * input's `i` and records the task ids it ran. Their names carry `prefix`, so that workers of other tests' apps on
 * the same schema leave them alone.
 */
import { z } from 'zod';
import type { App } from '../../src/client/App.js';
import { gate } from './gate.js';

export function longAndQuick(app: App, prefix: string) {
  const release = gate();
  const ran: string[] = [];
  const long = app.task({
    name: `${prefix}.long`,
    input: z.object({}),
    handler: () => release.wait.then(() => 'long'),
  });
  const quick = app.task({
    name: `${prefix}.quick`,
    input: z.object({ i: z.number() }),
    handler: ({ i }, ctx) => {
      ran.push(ctx.taskId);
      return i;
    },
  });
  return { long, quick, ran, release: release.open };
}
