/**
 * The dashboard's signal action: refused without the token and without the app (a dashboard over the database
 * alone has no schema to validate with), a payload that fails the schema refused with nothing stored, a good one
 * completing the waiting node; the graph marks wait nodes.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { workflow } from '../../src/workflow/WorkflowDefinition.js';
import { useTestSchema } from '../support/db.js';
import { serveDashboard } from './support.js';

const TOKEN = 'signal-test-token';
const t = await useTestSchema();
const app = t.app();
const wf = workflow(app, 'dash.approval');
const decision = wf.waitFor('dash.decision', { schema: z.object({ approved: z.boolean() }) });
const flow = wf.build({ output: decision });

const fromApp = await serveDashboard(app, { token: TOKEN });
const fromDb = await serveDashboard(app.db, { token: TOKEN });
const auth = { 'x-horsies-token': TOKEN };

describe('dashboard signal action', () => {
  it('delivers a validated payload to a waiting node', async () => {
    const handle = await flow.start();
    const path = `api/workflows/${handle.id}/signal`;
    // The node's detail says it waits for a signal: the page shows the signal form there.
    const detail = await fromApp.get<{ node: { id: string; wait?: string } }>(
      `api/workflows/${handle.id}/nodes/0`,
    );
    expect(detail.status).toBe(200);
    expect([detail.body.node.id, detail.body.node.wait]).toEqual(['dash.decision', 'signal']);

    expect((await fromApp.post(path, { node: 'dash.decision', payload: { approved: true } })).status).toBe(
      401,
    );
    expect(
      (await fromDb.post(path, { node: 'dash.decision', payload: { approved: true } }, auth)).status,
    ).toBe(409);
    const bad = await fromApp.post<{ error: string }>(
      path,
      { node: 'dash.decision', payload: { approved: 'yes' } },
      auth,
    );
    expect(bad.status).toBe(400);
    expect(bad.body.error).toContain('payload of signal "dash.decision"');
    const missing = await fromApp.post(path, { node: 'nope', payload: {} }, auth);
    expect(missing.status).toBe(404);
    expect(await handle.status()).toBe('RUNNING');

    const sent = await fromApp.post<{ delivered: string }>(
      path,
      { node: 'dash.decision', payload: { approved: true } },
      auth,
    );
    expect(sent.status).toBe(200);
    expect(sent.body.delivered).toBe('resumed');
    expect(await handle.result({ timeoutMs: 5_000 })).toEqual({ ok: true, value: { approved: true } });
  });
});
