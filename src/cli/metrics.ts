/** `horsies worker --metrics-port N`: the worker's process serves its app's metrics at `/metrics`. */
import { InvalidArgumentError } from 'commander';
import type { App } from '../client/App.js';
import { HorsiesError } from '../errors.js';
import { serveMetrics } from '../metrics/MetricsServer.js';
import type { MetricsServer } from '../metrics/MetricsServer.js';

/** Parses a TCP port (0 picks a free one). */
export function port(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 65_535)
    throw new InvalidArgumentError('must be a port, 0 to 65535');
  return n;
}

/** Serves `app.metrics` when a port was given; null otherwise. */
export async function serveAppMetrics(
  app: App,
  options: { metricsPort?: number; metricsHost?: string },
): Promise<MetricsServer | null> {
  if (options.metricsPort === undefined) return null;
  if (app.metrics === null) {
    throw new HorsiesError(
      'CONFIG_INVALID',
      "--metrics-port needs the app's metrics: its config sets metrics: false",
    );
  }
  const server = await serveMetrics(app.metrics.registry, {
    port: options.metricsPort,
    host: options.metricsHost,
  });
  app.logger.info({ url: server.url }, 'serving metrics');
  return server;
}
