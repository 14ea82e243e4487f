/**
 * The app module the soak's worker processes load (`horsies worker scripts/soak/workerApp.ts`).
 * Environment: DATABASE_URL, HORSIES_SCHEMA, SOAK_RETENTION_MS (ms), HORSIES_LOG_LEVEL.
 */
import { defineSoakApp } from './app.js';

export const app = defineSoakApp({}, Number(process.env.SOAK_RETENTION_MS ?? 180_000)).app;
