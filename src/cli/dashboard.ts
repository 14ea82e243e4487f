/** `horsies dashboard`: serves the web dashboard (127.0.0.1:7777 by default). */
import { createServer } from 'node:http';
import { isIP } from 'node:net';
import { Command, InvalidArgumentError } from 'commander';
import { Database, connectionFault } from '../db/Database.js';
import { checkSchema } from '../db/schemaVersion.js';
import { HorsiesError } from '../errors.js';
import { createDashboard } from '../dashboard/Dashboard.js';
import type { App } from '../client/App.js';
import { loadAppWithSchedules } from './schedules.js';

interface DashboardCommandOptions {
  databaseUrl?: string;
  schema?: string;
  export?: string;
  host: string;
  port: number;
  token?: string;
  readToken?: string | true;
  hideData?: boolean;
}

function port(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 65_535) throw new InvalidArgumentError('must be a port number');
  return n;
}

/** True for names and addresses that only this machine reaches. */
export function isLoopback(host: string): boolean {
  if (host === 'localhost') return true;
  if (isIP(host) === 4) return host.startsWith('127.');
  return host === '::1' || host === '[::1]';
}

/** Adds `dashboard` to the program. */
export function addDashboardCommand(program: Command): void {
  program
    .command('dashboard')
    .description('serve the web dashboard for the app exported by [module], or for --database-url')
    .argument('[module]', 'file that exports the app (default export, or a named export "app")')
    .option('--export <name>', 'name of the export that holds the app')
    .option('--database-url <url>', 'connection string, without a module (default: $DATABASE_URL)')
    .option('--schema <name>', 'PostgreSQL schema, without a module (default: $HORSIES_SCHEMA or "horsies")')
    .option('--host <host>', 'address to listen on (anything but loopback requires a token)', '127.0.0.1')
    .option('--port <port>', 'port to listen on', port, 7777)
    .option('--token <token>', 'enable actions for requests carrying it (default: $HORSIES_DASHBOARD_TOKEN)')
    .option(
      '--read-token [token]',
      'reads need this token too; alone, the --token guards reads as well (default: $HORSIES_DASHBOARD_READ_TOKEN)',
    )
    .option('--hide-data', 'never show task inputs and results')
    .action(async (modulePath: string | undefined, options: DashboardCommandOptions) => {
      const token = options.token ?? (process.env.HORSIES_DASHBOARD_TOKEN || undefined);
      if (!isLoopback(options.host) && !token) {
        throw new HorsiesError(
          'CONFIG_INVALID',
          `listening on ${options.host} (not loopback) requires a token: pass --token or set HORSIES_DASHBOARD_TOKEN`,
        );
      }
      let app: App | null = null;
      let db: Database;
      if (modulePath) {
        app = await loadAppWithSchedules(modulePath, options.export);
        db = app.db;
      } else {
        const url = options.databaseUrl ?? process.env.DATABASE_URL;
        if (!url)
          throw new HorsiesError('CONFIG_INVALID', 'give an app module, --database-url or DATABASE_URL');
        db = new Database({
          connectionString: url,
          schema: options.schema ?? (process.env.HORSIES_SCHEMA || 'horsies'),
          poolSize: 4,
        });
      }
      // A database that cannot be reached or a schema not migrated is said now, not on the first page load.
      await checkSchema(db).catch(async (error: unknown) => {
        await (app ? app.close() : db.end());
        throw connectionFault(error, db.target) ?? error;
      });
      // From a module, the app itself: its declared schedules (with their patterns and zones) and their trigger.
      const dashboard = createDashboard(app ?? db, {
        token,
        readToken: options.readToken,
        hideData: options.hideData,
      });
      const server = createServer(dashboard.handle);
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(options.port, options.host, () => resolve());
      });
      const address = server.address();
      const shown = typeof address === 'object' && address ? address.port : options.port;
      const host =
        options.host.includes(':') && !options.host.startsWith('[') ? `[${options.host}]` : options.host;
      console.log(
        `horsies dashboard on http://${host}:${shown}/ (schema ${db.schema}, ${token ? 'actions enabled' : 'read-only'}${dashboard.readsNeedToken ? ', reads need a token' : ''}${options.hideData ? ', inputs and results hidden' : ''})`,
      );
      const stop = (): void => {
        server.closeAllConnections();
        server.close();
        void dashboard
          .close()
          .then(() => (app ? app.close() : db.end()))
          .then(() => process.exit(0));
      };
      process.once('SIGINT', stop);
      process.once('SIGTERM', stop);
    });
}
