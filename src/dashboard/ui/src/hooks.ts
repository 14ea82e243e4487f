/** Data hooks: read an API path, again on every live change and whenever `path` changes. */
import { useEffect, useRef, useState } from 'preact/hooks';
import { get } from './api.js';
import { useLiveVersion } from './live.js';

/** The state of a read. */
export interface Read<T> {
  data: T | null;
  error: string | null;
  /** Re-read now (after an action). */
  reload: () => void;
}

/** Reads `api/<path>` (null: nothing to read), live. */
export function useApi<T>(path: string | null): Read<T> {
  const version = useLiveVersion();
  const [nudge, setNudge] = useState(0);
  const [state, setState] = useState<{ data: T | null; error: string | null; path: string | null }>({
    data: null,
    error: null,
    path: null,
  });
  // Reads are numbered: an answer is shown unless a later read of the same path was shown already. A live
  // change while a read is in flight starts another, but does not throw the first away (on a large workflow the
  // first answer would otherwise wait for the second).
  const issued = useRef(0);
  const shown = useRef(0);
  const currentPath = useRef(path);
  currentPath.current = path;
  useEffect(() => {
    if (path === null) return;
    const mine = ++issued.current;
    const fresh = (): boolean => currentPath.current === path && mine > shown.current;
    get<T>(path).then(
      (data) => {
        if (!fresh()) return;
        shown.current = mine;
        setState({ data, error: null, path });
      },
      (error: Error) => {
        if (!fresh()) return;
        shown.current = mine;
        setState((s) => ({ data: s.path === path ? s.data : null, error: error.message, path }));
      },
    );
  }, [path, version, nudge]);
  return {
    data: state.path === path ? state.data : null,
    error: state.path === path ? state.error : null,
    reload: () => setNudge((n) => n + 1),
  };
}
