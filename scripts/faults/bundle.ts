/**
 * The worker processes' code as one bundle (esbuild, ESM with shared chunks): the `horsies` CLI and the fault
 * app, so that `node <out>/src/cli/main.js worker <out>/scripts/faults/workerApp.js` runs the CLI on the app
 * with one copy of the library between them. A worker then starts in a fraction of the time tsx takes to
 * compile the sources, which is what lets a run deal a thousand kills. Packages stay external (resolved through a
 * `node_modules` link); the migrations and package.json are copied where the bundled code looks for them.
 */
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { build } from 'esbuild';

/** A built bundle; `remove()` deletes it. */
export interface WorkerBundle {
  /** Arguments of `node` that start `horsies worker` on the fault app. */
  args: string[];
  remove(): void;
}

/** Bundles the CLI and the fault app of the checkout at `root`. */
export async function bundleWorker(root: string): Promise<WorkerBundle> {
  const out = mkdtempSync(join(tmpdir(), 'horsies-faults-build-'));
  try {
    await build({
      absWorkingDir: root,
      entryPoints: ['src/cli/main.ts', 'scripts/faults/workerApp.ts'],
      outbase: root,
      outdir: out,
      bundle: true,
      splitting: true,
      format: 'esm',
      platform: 'node',
      target: 'node20',
      packages: 'external',
      logLevel: 'error',
    });
    symlinkSync(join(root, 'node_modules'), join(out, 'node_modules'));
    writeFileSync(join(out, 'package.json'), readFileSync(join(root, 'package.json')));
    // The migrator reads its folders (numbered migrations, routine files) next to the module that holds it: a
    // chunk at the top, or an entry.
    for (const dir of [out, join(out, 'src/cli'), join(out, 'scripts/faults')]) {
      for (const folder of ['migrations', 'routines']) {
        const holds = readdirSync(dir).some(
          (f) => f.endsWith('.js') && readFileSync(join(dir, f), 'utf8').includes(`"${folder}"`),
        );
        if (holds) cpSync(join(root, 'src/db', folder), join(dir, folder), { recursive: true });
      }
    }
  } catch (error) {
    rmSync(out, { recursive: true, force: true });
    throw error;
  }
  return {
    args: [join(out, 'src/cli/main.js'), 'worker', join(out, 'scripts/faults/workerApp.js')],
    remove: () => rmSync(out, { recursive: true, force: true }),
  };
}
