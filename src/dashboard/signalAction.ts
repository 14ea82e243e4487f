/**
 * The dashboard's signal action: `POST api/workflows/<id>/signal` with `{ node, payload, deliveryId? }` delivers a
 * signal to a wait node through the app (`app.signal()`), whose workflows declare the signal's schema; the payload
 * is validated before anything is stored.
 */
import type { App } from '../client/App.js';
import { SignalError } from '../errors.js';
import type { SignalReceipt } from '../workflow/signals.js';

/** An answer to the action: its HTTP status and body. */
export interface SignalAnswer {
  status: number;
  body: SignalReceipt | { error: string };
}

/** Delivers the signal of `body` to run `id`; the caller checked the action token. */
export async function runSignalAction(app: App | null, id: string, body: unknown): Promise<SignalAnswer> {
  if (!app) {
    return {
      status: 409,
      body: { error: 'signals need the app: serve the dashboard from the app module that declares them' },
    };
  }
  const { node, payload, deliveryId } = (body ?? {}) as {
    node?: unknown;
    payload?: unknown;
    deliveryId?: unknown;
  };
  if (typeof node !== 'string' || (deliveryId !== undefined && typeof deliveryId !== 'string')) {
    return {
      status: 400,
      body: { error: 'the body must be { node: string, payload, deliveryId?: string }' },
    };
  }
  try {
    return { status: 200, body: await app.signal(id, node, payload, { id: deliveryId }) };
  } catch (error) {
    if (
      error instanceof SignalError &&
      (error.code === 'WORKFLOW_NOT_FOUND' || error.code === 'NODE_NOT_FOUND')
    ) {
      return { status: 404, body: { error: error.message } };
    }
    throw error;
  }
}
