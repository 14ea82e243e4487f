/**
 * The package as npm would publish it (`npm run check:package`, in `npm run check`): builds the library, packs it
 * into a temporary folder with `npm pack`, and fails (one line per problem) unless
 *
 * - `publint` and `@arethetypeswrong/cli` (profile `esm-only`: the package is ESM, `require` is not offered) find
 *   nothing wrong in the tarball;
 * - it holds what a user reads (README.md, CHANGELOG.md, the docs index, dist/ with its entry points) and nothing
 *   of the repository's own (src/, test/, bench/, scripts/; docs/development.md for contributors, and
 *   docs/benchmarks.md, read when choosing a queue, stay in the repository);
 * - every source map in it is complete without the repository: its sources inlined, or shipped beside it;
 * - the docs it ships stay under 5,000 lines.
 *
 * Prints the tarball's size, its file count and the docs' lines. `--keep` leaves the tarball in the temporary folder.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';

const DOCS_LINE_LIMIT = 5000;
const root = resolve(import.meta.dirname, '..');
const bin = (name: string): string => join(root, 'node_modules', '.bin', name);
const work = mkdtempSync(join(tmpdir(), 'horsies-pack-'));
const problems: string[] = [];

function run(command: string, args: string[], options: { quiet?: boolean } = {}): string {
  return execFileSync(command, args, {
    cwd: root,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', options.quiet ? 'pipe' : 'inherit'],
  });
}

try {
  run('npm', ['run', '--silent', 'build:lib']);
  // tsc never deletes: the output of a source file since moved or removed would be packed (and its map would
  // point at a source that is gone). CI builds from a clean clone; a working tree may not.
  for (const entry of readdirSync(join(root, 'dist'), { recursive: true, withFileTypes: true })) {
    const path = relative(join(root, 'dist'), join(entry.parentPath, entry.name));
    const stem = path.match(/^(.*?)(\.d\.ts|\.js)(\.map)?$/)?.[1];
    if (!entry.isFile() || !stem || path.startsWith('dashboard/ui/')) continue;
    if (!existsSync(join(root, 'src', `${stem}.ts`)) && !existsSync(join(root, 'src', `${stem}.tsx`))) {
      rmSync(join(root, 'dist', path));
    }
  }
  const [packed] = JSON.parse(
    run('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', work], { quiet: true }),
  ) as { filename: string; size: number; unpackedSize: number; files: { path: string }[] }[];
  if (!packed) throw new Error('npm pack printed no package');
  const tarball = join(work, packed.filename);
  const files = packed.files.map((f) => f.path);

  for (const needed of ['README.md', 'CHANGELOG.md', 'docs/README.md', 'dist/index.js', 'dist/index.d.ts']) {
    if (!files.includes(needed)) problems.push(`package: ${needed} is missing`);
  }
  for (const file of files) {
    if (
      /^(src|test|bench|scripts|examples|etc)\//.test(file) ||
      file === 'docs/development.md' ||
      file === 'docs/benchmarks.md'
    ) {
      problems.push(`package: ${file} is the repository's, not the package's`);
    }
  }

  const unpacked = join(work, 'package');
  execFileSync('tar', ['-xzf', tarball, '-C', work]);
  for (const file of files.filter((f) => f.endsWith('.map'))) {
    const map = JSON.parse(readFileSync(join(unpacked, file), 'utf8')) as {
      sources: string[];
      sourcesContent?: (string | null)[];
      sourceRoot?: string;
    };
    map.sources.forEach((source, i) => {
      if (typeof map.sourcesContent?.[i] === 'string') return;
      const path = resolve(dirname(join(unpacked, file)), map.sourceRoot ?? '', source);
      if (!existsSync(path)) {
        problems.push(`package: ${file} maps to ${relative(unpacked, path)}, which is not in the package`);
      }
    });
  }

  const docsLines = files
    .filter((f) => f.startsWith('docs/') && f.endsWith('.md'))
    .reduce((n, f) => n + readFileSync(join(unpacked, f), 'utf8').split('\n').length - 1, 0);
  if (docsLines >= DOCS_LINE_LIMIT) {
    problems.push(
      `package: docs/ ships ${docsLines} lines, at most ${DOCS_LINE_LIMIT - 1}: move logs to bench/`,
    );
  }

  for (const [tool, args] of [
    ['publint', ['run', tarball, '--strict']],
    ['attw', [tarball, '--profile', 'esm-only', '--format', 'ascii']],
  ] as const) {
    try {
      run(bin(tool), [...args], { quiet: true });
    } catch (error) {
      const output = error as { stdout?: string; stderr?: string };
      console.error(`${output.stdout ?? ''}${output.stderr ?? ''}`.trim());
      problems.push(`package: ${tool} failed on ${packed.filename} (its report is above)`);
    }
  }

  for (const problem of problems) console.error(problem);
  console.log(
    `package: ${packed.filename}, ${(packed.size / 1024).toFixed(0)} kB packed, ` +
      `${(packed.unpackedSize / 1024).toFixed(0)} kB unpacked, ${files.length} files, docs ${docsLines} lines` +
      (problems.length ? `: ${problems.length} problem(s)` : ': publint and attw pass'),
  );
  if (problems.length) process.exitCode = 1;
} finally {
  if (!process.argv.includes('--keep')) rmSync(work, { recursive: true, force: true });
}
