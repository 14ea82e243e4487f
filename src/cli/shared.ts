/** Pieces shared by the CLI's command groups: connection options, a short-lived app, and error reporting. */
import type { Command } from 'commander';
import { CommanderError } from 'commander';
import { pino } from 'pino';
import { App } from '../client/App.js';
import { connectionFault } from '../db/Database.js';
import { checkSchema } from '../db/schemaVersion.js';
import { DatabaseNotConfiguredError, HorsiesError } from '../errors.js';

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

/** `--database-url`, else `DATABASE_URL`; throws {@link DatabaseNotConfiguredError} when neither is set. */
export function resolveDatabaseUrl(option: string | undefined): string {
  const url = option || process.env.DATABASE_URL;
  if (!url) throw new DatabaseNotConfiguredError();
  return url;
}

/**
 * Runs `fn` with an app on the given connection, closing it afterwards. The schema is checked first, so a
 * database that cannot be reached or is not migrated fails with our error before the command's own statement.
 */
export async function withApp<T>(options: ConnectionOptions, fn: (app: App) => Promise<T>): Promise<T> {
  const app = new App({
    databaseUrl: resolveDatabaseUrl(options.databaseUrl),
    schema: options.schema,
    poolSize: 2,
    logger: pino({ level: 'warn' }),
  });
  try {
    await checkSchema(app.db).catch((error: unknown) => {
      throw connectionFault(error, app.db.target) ?? error;
    });
    return await fn(app);
  } finally {
    await app.close();
  }
}

/** True when the command line asks for error stacks (`--verbose`, or `HORSIES_VERBOSE=1`). */
export function isVerbose(argv: readonly string[] = process.argv): boolean {
  return argv.includes('--verbose') || process.env.HORSIES_VERBOSE === '1';
}

/**
 * Prints a failed command's error the one way every command does: `horsies: <message>` on stderr, in our words
 * for connection faults, with the stack (and causes) under `--verbose`. Returns the exit code, 1.
 */
export function reportError(error: unknown, verbose = isVerbose()): number {
  const shown = connectionFault(error) ?? error;
  const message = shown instanceof Error ? shown.message : String(shown);
  console.error(`horsies: ${message}`);
  if (verbose) {
    for (let e: unknown = shown; e instanceof Error; e = e.cause) {
      console.error(e === shown ? (e.stack ?? String(e)) : `caused by: ${e.stack ?? String(e)}`);
    }
  } else if (!(shown instanceof HorsiesError) && !(shown instanceof CommanderError)) {
    console.error('horsies: run with --verbose for the stack');
  }
  return 1;
}
