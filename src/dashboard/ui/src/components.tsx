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
  // Focusable: a long value scrolls, and a keyboard must reach it to scroll it.
  return (
    <pre data-testid={props.testid} tabIndex={0}>
      {JSON.stringify(props.value, null, 2)}
    </pre>
  );
}

/** The hash of `#/<route>` with `query` changed: a null or empty value removes the parameter. */
export function hashWith(
  route: string,
  query: URLSearchParams,
  changes: Record<string, string | null>,
): string {
  const next = new URLSearchParams(query);
  for (const [k, v] of Object.entries(changes)) {
    if (v === null || v === '') next.delete(k);
    else next.set(k, v);
  }
  return `#/${route}?${next.toString()}`;
}

/**
 * Previous and Next through keyset cursors. `back` holds the cursors of the pages before this one (kept by the
 * page, which clears it when its filters change); `go` shows the page at a cursor.
 */
export function Pager(props: {
  back: (string | null)[];
  setBack: (back: (string | null)[]) => void;
  cursor: string | null;
  nextCursor: string | null | undefined;
  go: (cursor: string | null) => void;
}): JSX.Element {
  const { back, setBack, cursor, nextCursor, go } = props;
  return (
    <div class="pager">
      <button
        disabled={back.length === 0}
        onClick={() => {
          const previous = back[back.length - 1] ?? null;
          setBack(back.slice(0, -1));
          go(previous);
        }}
      >
        ← Previous
      </button>
      <button
        disabled={!nextCursor}
        data-testid="next-page"
        onClick={() => {
          setBack([...back, cursor]);
          go(nextCursor ?? null);
        }}
      >
        Next →
      </button>
    </div>
  );
}
