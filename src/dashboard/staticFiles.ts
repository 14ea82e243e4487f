/**
 * Serves the built UI. Files come from `dist/dashboard/ui` of this package (found from this module's own place,
 * whether it runs compiled from `dist/` or from source), never from outside that folder. Hashed asset names are
 * cached for good; `index.html` is revalidated each time.
 */
import { createReadStream, existsSync, statSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { dirname, extname, join, normalize, resolve, sep } from 'node:path';

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.json': 'application/json; charset=utf-8',
};

/**
 * Security headers of every response the dashboard sends (pages, files, API answers, redirects, errors): no
 * framing (actions are buttons), no inline or foreign scripts, nothing loaded or sent elsewhere, no plugins. The
 * graph's layout runs in a worker loaded from the dashboard's own files (`worker-src 'self'`). Inline styles
 * stay allowed: preact sets the `style` attribute of a few elements (widths of bars), which a `style-src`
 * without 'unsafe-inline' would block; a style cannot run script.
 */
export const SECURITY_HEADERS = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; worker-src 'self'; style-src 'self' 'unsafe-inline'; " +
    "img-src 'self' data:; font-src 'self'; connect-src 'self'; manifest-src 'self'; object-src 'none'; " +
    "frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
};

let defaultDir: string | undefined;

/** The package's `dist/dashboard/ui`: the nearest folder above this module that holds `package.json`. */
export function defaultUiDir(): string {
  if (defaultDir) return defaultDir;
  let dir = import.meta.dirname;
  while (!existsSync(join(dir, 'package.json')) && dirname(dir) !== dir) dir = dirname(dir);
  defaultDir = join(dir, 'dist', 'dashboard', 'ui');
  return defaultDir;
}

/** Answers a GET for a UI file; `path` is relative to the mount point. Unknown paths get the page. */
export function serveStatic(req: IncomingMessage, res: ServerResponse, path: string, uiDir?: string): void {
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    res.writeHead(405, { allow: 'GET, HEAD' }).end();
    return;
  }
  const root = resolve(uiDir ?? defaultUiDir());
  let decoded: string;
  try {
    decoded = decodeURIComponent(path);
  } catch {
    res.writeHead(400, { 'content-type': 'text/plain' }).end('bad percent-escape in the path');
    return;
  }
  let relative = normalize(decoded).replace(/^([/\\])+/, '');
  if (relative === '' || relative === '.') relative = 'index.html';
  let file = resolve(root, relative);
  if (file !== root && !file.startsWith(root + sep)) {
    res.writeHead(404).end();
    return;
  }
  if (!existsSync(file) || !statSync(file).isFile()) {
    if (extname(relative) !== '') {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
      return;
    }
    file = join(root, 'index.html');
  }
  if (!existsSync(file)) {
    res
      .writeHead(500, { 'content-type': 'text/plain' })
      .end(`the dashboard UI is not built (${root}): run npm run build`);
    return;
  }
  const isPage = file.endsWith('index.html');
  res.writeHead(200, {
    'content-type': TYPES[extname(file)] ?? 'application/octet-stream',
    'cache-control': isPage ? 'no-cache' : 'public, max-age=31536000, immutable',
  });
  if (req.method === 'HEAD') {
    res.end();
    return;
  }
  createReadStream(file).pipe(res);
}
