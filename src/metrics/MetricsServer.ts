/** Serves a metrics registry over HTTP at `/metrics` for Prometheus to scrape (`horsies worker --metrics-port`). */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';

/** Settings of {@link serveMetrics}. */
export interface MetricsServerOptions {
  /** TCP port; 0 picks a free one. */
  port: number;
  /** Interface to listen on. Default `0.0.0.0` (Prometheus scrapes from another machine). */
  host?: string | undefined;
}

/** A running metrics endpoint. */
export interface MetricsServer {
  /** The port it listens on (the chosen one when 0 was asked). */
  readonly port: number;
  /** The endpoint's URL. */
  readonly url: string;
  /** Stops listening. Idempotent. */
  close(): Promise<void>;
}

/** Starts serving `registry` at `/metrics`; resolves once it listens. */
export async function serveMetrics(
  registry: Registry,
  options: MetricsServerOptions,
): Promise<MetricsServer> {
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET' || path !== '/metrics') {
      res.writeHead(req.method === 'GET' ? 404 : 405, { 'content-type': 'text/plain' });
      res.end(req.method === 'GET' ? 'not found: metrics are at /metrics\n' : 'method not allowed\n');
      return;
    }
    registry.metrics().then(
      (body) => {
        res.writeHead(200, { 'content-type': registry.contentType });
        res.end(body);
      },
      (error: unknown) => {
        res.writeHead(500, { 'content-type': 'text/plain' });
        res.end(`collecting metrics failed: ${(error as Error).message}\n`);
      },
    );
  });
  const host = options.host ?? '0.0.0.0';
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  let closing: Promise<void> | null = null;
  return {
    port,
    url: `http://${host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host}:${port}/metrics`,
    close: () =>
      (closing ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      })),
  };
}
