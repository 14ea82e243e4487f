/** Loads the user's module that defines the app (`horsies worker <module>`, and the threads of blocking tasks). */
import { existsSync } from 'node:fs';
import { extname, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { App } from './App.js';
import { isApp } from './App.js';

const TYPESCRIPT_EXTENSIONS = new Set(['.ts', '.mts', '.cts', '.tsx']);

/**
 * Imports `modulePath` and returns its app: the export named `exportName`, else the default export, else an
 * export named `app`. TypeScript modules are loaded through `tsx` when it is installed.
 */
export async function loadApp(modulePath: string | URL, exportName?: string): Promise<App> {
  const file =
    modulePath instanceof URL || modulePath.startsWith('file:')
      ? fileURLToPath(modulePath)
      : resolve(modulePath);
  if (!existsSync(file)) throw new Error(`module not found: ${file}`);
  if (TYPESCRIPT_EXTENSIONS.has(extname(file)) && !process.execArgv.some((a) => a.includes('tsx'))) {
    try {
      const { register } = await import('tsx/esm/api');
      register();
    } catch (error) {
      throw new Error(
        `${file} is TypeScript: install "tsx" to load it directly, or point at the compiled .js`,
        {
          cause: error,
        },
      );
    }
  }
  const mod = (await import(pathToFileURL(file).href)) as Record<string, unknown>;
  const candidates = exportName ? [exportName] : ['default', 'app'];
  for (const name of candidates) {
    const value = mod[name];
    if (isApp(value)) return value;
  }
  throw new Error(
    `${file} has no app export (looked for ${candidates.map((c) => `"${c}"`).join(', ')}); ` +
      'export the object returned by createApp()',
  );
}
