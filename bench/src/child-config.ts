/** The contract between the scenarios that run workers in their own processes and the child (src/child.ts). */
import type { RecoverySettings } from './peers/types.js';

export interface ChildConfig {
  subject: string;
  postgresUrl: string;
  redis: { host: string; port: number } | null;
  /**
   * `hold` (recovery): start the worker at once, with handlers that never return, print `ready`, then `started
   * <seq>` for each task run. `drain` (multi-process): open the session, print `ready`, start the worker when
   * `start` arrives on stdin, print `runs <n>` (handler runs so far) every 50 ms while it changes, and on `stop`
   * stop the worker gracefully, close the session, print `stopped` and exit.
   */
  mode: 'hold' | 'drain';
  /** Handlers at once. */
  concurrency: number;
  /** Recovery thresholds; only the `hold` mode uses them. */
  recovery?: RecoverySettings;
  /** The child exits by itself after this long. */
  lifetimeMs: number;
}

/** Environment variable carrying the JSON config to the child. */
export const CHILD_CONFIG_VARIABLE = 'HORSIES_BENCH_CHILD';
