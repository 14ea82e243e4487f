/** Pieces shared by the CLI's command groups: connection options and a short-lived app. */
import type { Command } from 'commander';
import { pino } from 'pino';
import { App } from '../client/App.js';

/** Options every operator command takes. */
export interface ConnectionOptions {
  databaseUrl?: string;
  schema?: string;
}

/** Adds `--database-url` and `--schema`. */
export function withConnection(command: Command): Command {
  return command
    .option('--database-url <url>', 'connection string (default: $DATABASE_URL)')
    .option('--schema <name>', 'PostgreSQL schema (default: $HORSIES_SCHEMA or "horsies")');
}

/** Runs `fn` with an app on the given connection, closing it afterwards. */
export async function withApp<T>(options: ConnectionOptions, fn: (app: App) => Promise<T>): Promise<T> {
  const app = new App({
    databaseUrl: options.databaseUrl,
    schema: options.schema,
    poolSize: 2,
    logger: pino({ level: 'warn' }),
  });
  try {
    return await fn(app);
  } finally {
    await app.close();
  }
}
