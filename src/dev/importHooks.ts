/**
 * Tells which files a process imports from now on, for `horsies dev`'s worker child: a module loader hook (Node's
 * `module.register`, run on the loader's thread) posts the URL of every file it loads to this thread, which passes
 * the paths on. Files under `node_modules` are left out: a dependency changes with an install, not an edit.
 *
 * The hook is given as a `data:` URL, so it loads the same from `dist/` and from source (through tsx). A file is
 * reported before it is loaded, so a module that fails to compile is reported too (its fix must restart the
 * worker).
 */
import { register } from 'node:module';
import { fileURLToPath } from 'node:url';
import { MessageChannel } from 'node:worker_threads';

const HOOK = `
let port;
export function initialize(data) {
  port = data.port;
}
export async function load(url, context, nextLoad) {
  if (url.startsWith('file:') && !url.includes('/node_modules/')) port.postMessage(url);
  return nextLoad(url, context);
}
`;

/** Calls `onImport` with the absolute path of every file this process loads from now on (but dependencies). */
export function reportImports(onImport: (file: string) => void): void {
  const { port1, port2 } = new MessageChannel();
  port1.on('message', (url: string) => onImport(fileURLToPath(url)));
  // The channel must not keep the process alive.
  port1.unref();
  register(`data:text/javascript,${encodeURIComponent(HOOK)}`, {
    data: { port: port2 },
    transferList: [port2],
  });
}
