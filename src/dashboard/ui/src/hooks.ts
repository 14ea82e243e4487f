/** Data hooks: read an API path, again on every live change and whenever `path` changes. */
import { useEffect, useState } from 'preact/hooks';
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
  useEffect(() => {
    if (path === null) return;
    let current = true;
    get<T>(path).then(
      (data) => current && setState({ data, error: null, path }),
      (error: Error) =>
        current && setState((s) => ({ data: s.path === path ? s.data : null, error: error.message, path })),
    );
    return () => {
      current = false;
    };
  }, [path, version, nudge]);
  return {
    data: state.path === path ? state.data : null,
    error: state.path === path ? state.error : null,
    reload: () => setNudge((n) => n + 1),
  };
}
