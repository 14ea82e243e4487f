/**
 * One event stream per page: the server says "something changed" (coalesced, at most a few times a second), and
 * every mounted view re-reads what it shows. The stream is read with fetch rather than EventSource, which cannot
 * send the token header that a dashboard whose reads need a token asks for; it reconnects after a drop.
 */
import { useEffect, useState } from 'preact/hooks';
import { authHeaders } from './api.js';

type Listener = () => void;
const listeners = new Set<Listener>();
let started = false;
let reconnecting = false;
let connected = false;
const statusListeners = new Set<(up: boolean) => void>();
const RETRY_MS = 2000;

function changed(): void {
  for (const l of listeners) l();
}

/** Reads the stream until it ends; each `event: change` frame tells the views to re-read. */
async function follow(): Promise<void> {
  const response = await fetch('api/events', {
    headers: { accept: 'text/event-stream', ...authHeaders() },
    credentials: 'omit',
  });
  if (!response.ok || !response.body) throw new Error(`HTTP ${response.status}`);
  setConnected(true);
  // Changes made while the stream was down were not announced: read everything again.
  if (reconnecting) changed();
  reconnecting = true;
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let end = buffer.indexOf('\n\n');
    while (end >= 0) {
      const frame = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      if (frame.split('\n').some((line) => line === 'event: change')) changed();
      end = buffer.indexOf('\n\n');
    }
  }
}

function ensureSource(): void {
  if (started) return;
  started = true;
  const loop = (): void => {
    follow()
      .catch(() => undefined)
      .finally(() => {
        setConnected(false);
        setTimeout(loop, RETRY_MS);
      });
  };
  loop();
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
