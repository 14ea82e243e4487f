/**
 * Builds the previous release of horsies from its commit in a temporary folder, for tests that run its code beside
 * this checkout's (the rolling upgrade). 0.1.0 was never tagged: the commit is named by its full hash, which every
 * clone with the history has. A clone without it (a shallow one, as some CI checkouts are) fails the test with a
 * message that says so, rather than skipping it.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const ROOT = resolve(import.meta.dirname, '../..');

/** The previous release: its version and the commit it was made from. */
export const PREVIOUS_RELEASE = {
  version: '0.1.0',
  commit: 'd11044df30ac9f2772f6ac4172c8d0cebe4ebc11',
  /** Its newest migration. */
  migration: 28,
} as const;

/** A build of the previous release. */
export interface ReleaseBuild {
  /** The folder it was built in (its `dist/`, with `node_modules` linked to this checkout's). */
  dir: string;
  /** Its CLI's entry file, for `startWorkerProcess({ cli })`. */
  cli: string;
  /** File URL of its package entry (`dist/index.js`), for a dynamic import. */
  lib: string;
  /** How long the build took. */
  buildMs: number;
  /** Removes the folder. */
  remove(): void;
}

function git(args: string[]): string {
  return execFileSync('git', ['-C', ROOT, ...args], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  }).trim();
}

/** Throws, saying what to do, unless this clone has the release's commit. */
function checkHistory(): void {
  const { version, commit } = PREVIOUS_RELEASE;
  try {
    git(['cat-file', '-e', `${commit}^{commit}`]);
    return;
  } catch {
    // Explained below.
  }
  let why = 'the clone does not have it';
  try {
    if (git(['rev-parse', '--is-shallow-repository']) === 'true') {
      why = 'the clone is shallow: fetch the whole history (`git fetch --unshallow`) to run it';
    }
  } catch {
    why = `${ROOT} is not a git clone`;
  }
  throw new Error(
    `the rolling-upgrade test builds horsies ${version} from commit ${commit}, and ${why}. ` +
      'A CI checkout must fetch the full history (e.g. actions/checkout with fetch-depth: 0).',
  );
}

/**
 * Extracts the release's sources (`git archive`), links this checkout's `node_modules` (the release's runtime
 * dependencies are the same packages) and compiles it as its `build:lib` script does, without the type check
 * (`--noCheck`: the release was checked when it was made, and a newer `@types` package must not break its build)
 * and without declarations or source maps, which nothing here reads.
 */
export function buildPreviousRelease(): ReleaseBuild {
  checkHistory();
  const started = Date.now();
  const dir = mkdtempSync(join(tmpdir(), `horsies-${PREVIOUS_RELEASE.version}-`));
  try {
    const archive = join(dir, 'source.tar');
    git([
      'archive',
      '--format=tar',
      `--output=${archive}`,
      PREVIOUS_RELEASE.commit,
      'src',
      'scripts/copy-sql.mjs',
      'package.json',
      'tsconfig.json',
      'tsconfig.build.json',
    ]);
    execFileSync('tar', ['-xf', archive, '-C', dir]);
    rmSync(archive);
    symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir');
    const tsc = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
    const run = (args: string[]): void => {
      execFileSync(process.execPath, args, { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
    };
    run([tsc, '-p', 'tsconfig.build.json', '--noCheck', '--declaration', 'false', '--sourceMap', 'false']);
    run(['scripts/copy-sql.mjs']);
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    const output = error as { stdout?: Buffer; stderr?: Buffer };
    throw new Error(
      `building horsies ${PREVIOUS_RELEASE.version} failed: ${String(error)}\n` +
        `${output.stdout?.toString() ?? ''}${output.stderr?.toString() ?? ''}`,
      { cause: error },
    );
  }
  return {
    dir,
    cli: join(dir, 'dist', 'cli', 'main.js'),
    lib: pathToFileURL(join(dir, 'dist', 'index.js')).href,
    buildMs: Date.now() - started,
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}
