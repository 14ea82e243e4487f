/** Small pieces shared by the pages. */
import type { ComponentChildren, JSX } from 'preact';
import { useState } from 'preact/hooks';
import { act } from './api.js';

/** A status as a coloured label. */
export function Status(props: { status: string }): JSX.Element {
  return <span class={`status s-${props.status.toLowerCase()}`}>{props.status}</span>;
}

/** A figure with its label. */
export function Stat(props: {
  label: string;
  value: ComponentChildren;
  id: string;
  tone?: string;
}): JSX.Element {
  return (
    <div class={`stat ${props.tone ?? ''}`} data-testid={`stat-${props.id}`}>
      <div class="value">{props.value}</div>
      <div class="label">{props.label}</div>
    </div>
  );
}

/** The outcome of the last action, shown until the next one. */
export interface ActionState {
  busy: boolean;
  message: string | null;
  failed: boolean;
}

/**
 * Runs actions against the API and keeps their outcome for display. `onDone` re-reads the page's data.
 */
export function useAction(
  onDone: () => void,
): [ActionState, (path: string, body?: unknown, ok?: string) => void] {
  const [state, setState] = useState<ActionState>({ busy: false, message: null, failed: false });
  const run = (path: string, body: unknown = {}, ok = 'done'): void => {
    setState({ busy: true, message: null, failed: false });
    act<unknown>(path, body).then(
      (result) => {
        const n = (result as { ids?: unknown[] }).ids?.length;
        setState({ busy: false, message: n === undefined ? ok : `${ok}: ${n} task(s)`, failed: false });
        onDone();
      },
      (error: Error) => setState({ busy: false, message: error.message, failed: true }),
    );
  };
  return [state, run];
}

/** The message of the last action. */
export function ActionMessage(props: { state: ActionState }): JSX.Element | null {
  if (!props.state.message) return null;
  return (
    <p class={props.state.failed ? 'error' : 'notice'} role="status" data-testid="action-message">
      {props.state.message}
    </p>
  );
}

/** A JSON value, pretty-printed. */
export function JsonBlock(props: { value: unknown; testid: string }): JSX.Element {
  return <pre data-testid={props.testid}>{JSON.stringify(props.value, null, 2)}</pre>;
}
