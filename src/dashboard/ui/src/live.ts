/**
 * One event stream per page: the server says "something changed" (coalesced, at most a few times a second), and
 * every mounted view re-reads what it shows.
 */
import { useEffect, useState } from 'preact/hooks';

type Listener = () => void;
const listeners = new Set<Listener>();
let source: EventSource | null = null;
let connected = false;
const statusListeners = new Set<(up: boolean) => void>();

function ensureSource(): void {
  if (source) return;
  source = new EventSource('api/events');
  source.addEventListener('change', () => {
    for (const l of listeners) l();
  });
  source.onopen = () => setConnected(true);
  source.onerror = () => setConnected(false);
}

function setConnected(up: boolean): void {
  connected = up;
  for (const l of statusListeners) l(up);
}

/** A number that grows on every change event: put it in a data hook's dependencies to re-read. */
export function useLiveVersion(): number {
  const [version, setVersion] = useState(0);
  useEffect(() => {
    ensureSource();
    const l = (): void => setVersion((v) => v + 1);
    listeners.add(l);
    return () => {
      listeners.delete(l);
    };
  }, []);
  return version;
}

/** Whether the event stream is up. */
export function useLiveStatus(): boolean {
  const [up, setUp] = useState(connected);
  useEffect(() => {
    ensureSource();
    statusListeners.add(setUp);
    return () => {
      statusListeners.delete(setUp);
    };
  }, []);
  return up;
}
