import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { useTestSchema } from './support/db.js';
import { createWorker } from '../src/worker/Worker.js';

const t = await useTestSchema();

describe('smoke', () => {
  it('sends, runs and returns a result', async () => {
    const app = t.app();
    const add = app.task({
      name: 'add',
      input: z.object({ a: z.number(), b: z.number() }),
      handler: ({ a, b }) => a + b,
    });
    const worker = createWorker(app, { concurrency: 4 });
    await worker.start();
    const handle = await add.send({ a: 2, b: 3 });
    const result = await handle.result({ timeoutMs: 10_000 });
    expect(result).toEqual({ ok: true, value: 5 });
    await worker.stop();
  });
});
