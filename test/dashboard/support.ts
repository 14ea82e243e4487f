/** A dashboard served on an ephemeral loopback port for a test file, and helpers to call its API. */
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll } from 'vitest';
import { createDashboard } from '../../src/dashboard/Dashboard.js';
import type { Dashboard, DashboardOptions, DashboardSource } from '../../src/dashboard/Dashboard.js';

export interface Served {
  dashboard: Dashboard;
  server: Server;
  /** Base URL, ending with '/'. */
  url: string;
  get<T = unknown>(path: string): Promise<{ status: number; body: T }>;
  post<T = unknown>(
    path: string,
    body?: unknown,
    headers?: Record<string, string>,
  ): Promise<{ status: number; body: T }>;
}

/** Serves a dashboard over `source` until the file ends. `mount` puts it under a path of a plain server. */
export async function serveDashboard(
  source: DashboardSource,
  options: DashboardOptions = {},
  mount = '',
): Promise<Served> {
  const dashboard = createDashboard(source, { ...options, basePath: mount || undefined });
  const server = createServer((req, res) => {
    if (mount && !req.url?.startsWith(mount)) {
      res.writeHead(404).end('the host app');
      return;
    }
    dashboard.handle(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  afterAll(async () => {
    await dashboard.close();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}${mount}/`;
  const call = async <T>(path: string, init: RequestInit): Promise<{ status: number; body: T }> => {
    const response = await fetch(`${url}${path}`, init);
    const text = await response.text();
    return { status: response.status, body: (text ? JSON.parse(text) : null) as T };
  };
  return {
    dashboard,
    server,
    url,
    get: (path) => call(path, {}),
    post: (path, body = {}, headers = {}) =>
      call(path, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify(body),
      }),
  };
}
