/** The contract between the recovery scenario and its worker child process (src/child.ts). */
import type { RecoverySettings } from './peers/types.js';

export interface ChildConfig {
  subject: string;
  postgresUrl: string;
  redis: { host: string; port: number } | null;
  recovery: RecoverySettings;
}

/** Environment variable carrying the JSON config to the child. */
export const CHILD_CONFIG_VARIABLE = 'HORSIES_BENCH_CHILD';
