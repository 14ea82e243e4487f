/**
 * Progress on the dashboard's task page, in a real browser (Debian's Chromium, headless): the bar and the value
 * show, and a new report appears on the open page without a reload (the task_progress notification).
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createWorker } from '../../src/worker/Worker.js';
import { useTestSchema } from '../support/db.js';
import { launchBrowser } from '../dashboard/browser.js';
import { serveDashboard } from '../dashboard/support.js';

const t = await useTestSchema();

describe('progress on the dashboard', () => {
  it('shows the bar and the value, and follows new reports live', async () => {
    const app = t.app({ queues: ['ui'] });
    const steps: (() => void)[] = [];
    const step = (): Promise<void> => new Promise((resolve) => steps.push(resolve));
    const task = app.task({
      name: 'ui.import',
      queue: 'ui',
      input: z.object({}),
      handler: async (_input, ctx) => {
        ctx.progress({ done: 3, total: 4 });
        await step();
        ctx.progress({ done: 4, total: 4 });
        await step();
        return 'imported';
      },
    });
    const served = await serveDashboard(app, { live: { debounceMs: 20 } });
    const worker = createWorker(app, { queues: ['ui'] });
    await worker.start();
    const browser = await launchBrowser();
    try {
      const handle = await task.send({});
      const page = await browser.context.newPage();
      await page.goto(`${served.url}#/task/${handle.id}`);
      const progress = page.getByTestId('task-progress');
      await progress.getByText('75%').waitFor({ timeout: 15_000 });
      expect(await progress.locator('progress').getAttribute('value')).toBe('0.75');
      expect(await page.getByTestId('task-progress-value').textContent()).toContain('"done": 3');
      expect(await progress.textContent()).toContain('by attempt 1');
      // A new report (written once the throttle interval is up): the open page follows it.
      steps.shift()?.();
      await progress.getByText('100%').waitFor({ timeout: 15_000 });
      steps.shift()?.();
      expect(await handle.result({ timeoutMs: 10_000 })).toEqual({ ok: true, value: 'imported' });
    } finally {
      for (const release of steps) release();
      await browser.close();
      await worker.stop();
    }
  });
});
