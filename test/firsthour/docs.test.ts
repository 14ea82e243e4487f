/**
 * The CLI guide and the getting-started guide checked against the code: the commands they list exist, the
 * migration version they show is the library's, and their output examples have the shape the commands print.
 */
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { latestMigrationVersion } from '../../src/db/schemaVersion.js';
import { factoriesFor } from '../support/factories.js';
import { runCli } from '../support/cli.js';
import { databaseUrl, freshSchemaName, useTestSchema } from '../support/db.js';

const ROOT = resolve(import.meta.dirname, '../..');
const cliGuide = readFileSync(join(ROOT, 'docs/cli.md'), 'utf8');
const gettingStarted = readFileSync(join(ROOT, 'docs/getting-started.md'), 'utf8');
const LATEST = latestMigrationVersion();
const t = await useTestSchema();
const env = { DATABASE_URL: databaseUrl() };

/** The lines of the first ```console block that follows `$ <command>` in `doc`. */
function exampleAfter(doc: string, command: string): string[] {
  const start = doc.indexOf(`$ ${command}`);
  expect(start, `an example of "${command}"`).toBeGreaterThan(-1);
  const end = doc.indexOf('\n$ ', start + 1);
  const close = doc.indexOf('```', start);
  return doc
    .slice(start, Math.min(close, end === -1 ? close : end))
    .split('\n')
    .slice(1)
    .filter((l) => l.length > 0);
}

function columns(header: string | undefined): string[] {
  return (header ?? '').trim().split(/ {2,}/);
}

describe('docs/cli.md', () => {
  // One CLI process per command group, each starting tsx afresh: over a minute on a busy machine.
  it('lists only commands that exist', async () => {
    const block = /```text\n([\s\S]*?)```/.exec(cliGuide)?.[1] ?? '';
    const listed = block
      .split('\n')
      .filter((l) => l.startsWith('horsies '))
      .map((l) =>
        (l.split(/ {2,}/)[0] as string)
          .split(' ')
          .slice(1)
          .filter((w) => !/^[<[]/.test(w)),
      );
    expect(listed.length).toBeGreaterThan(15);
    const top = await runCli(['--help']);
    const commandsOf = (help: string): string[] =>
      [...help.slice(help.indexOf('Commands:')).matchAll(/^ {2}([a-z-]+)/gm)].map((m) => m[1] as string);
    const groups = new Map<string, string[]>([['', commandsOf(top.stdout)]]);
    for (const [first] of listed) {
      if (!first || groups.has(first)) continue;
      groups.set(first, commandsOf((await runCli([first, '--help'])).stdout));
    }
    for (const [first, second] of listed) {
      expect(groups.get('') ?? [], `horsies ${first}`).toContain(first);
      const sub = groups.get(first as string) ?? [];
      if (sub.length > 0) expect(sub, `horsies ${first} ${second}`).toContain(second);
    }
  }, 180_000);

  it('shows the migration version of this library, and migrate prints what it shows', async () => {
    for (const doc of [cliGuide, gettingStarted]) {
      for (const m of doc.matchAll(/(?:now at|already at|at) version (\d+)/g))
        expect(Number(m[1])).toBe(LATEST);
    }
    const [applied, already] = [
      exampleAfter(cliGuide, 'DATABASE_URL=postgres://app@db/app npx horsies migrate')[0],
      exampleAfter(cliGuide, 'npx horsies migrate')[0],
    ];
    const schema = freshSchemaName();
    try {
      const first = await runCli(['migrate', '--schema', schema], env);
      expect(first.stdout.trim()).toBe(applied?.replace('schema horsies:', `schema ${schema}:`));
      const second = await runCli(['migrate', '--schema', schema], env);
      expect(second.stdout.trim()).toBe(already?.replace('schema horsies:', `schema ${schema}:`));
    } finally {
      await t.pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    }
  });

  it('shows the columns tasks list, queues list and tasks show print', async () => {
    const { insertTask, insertAttempt } = factoriesFor(t);
    const id = await insertTask({ taskName: 'docs.example', status: 'FAILED', errorCode: 'SMTP_BUSY' });
    await insertAttempt(id, 1, 'FAILED');
    const cli = (...args: string[]) => runCli([...args, '--schema', t.schema], env);

    const list = await cli('tasks', 'list');
    expect(columns(list.stdout.split('\n')[0])).toEqual(
      columns(exampleAfter(cliGuide, 'npx horsies tasks list --status failed,pending')[0]),
    );
    const queues = await cli('queues', 'list');
    expect(columns(queues.stdout.split('\n')[0])).toEqual(
      columns(exampleAfter(cliGuide, 'npx horsies queues list')[0]),
    );

    const show = (await cli('tasks', 'show', id)).stdout.trimEnd().split('\n');
    const example = exampleAfter(cliGuide, 'npx horsies tasks show 01a1fcd6-c5ed-711f-9340-bcb88a0253ab');
    const labels = (lines: string[]): string[] =>
      lines
        .slice(
          0,
          lines.findIndex((l) => l.startsWith('attempt ')),
        )
        .map((l) => l.split(/ {2,}/)[0] as string);
    const printed = labels(show);
    const shown = labels(example);
    // The example's labels are real ones, in the order the command prints them.
    const common = shown.filter((l) => printed.includes(l));
    expect(common).toEqual(printed.filter((l) => shown.includes(l)));
    for (const label of ['task', 'name', 'queue', 'status', 'error', 'input', 'sent', 'attempts']) {
      expect(printed).toContain(label);
      expect(shown).toContain(label);
    }
    const attemptsHeader = (lines: string[]) => columns(lines.find((l) => l.startsWith('attempt ')));
    expect(attemptsHeader(show)).toEqual(attemptsHeader(example));
  });

  it('shows the error messages the commands print', async () => {
    const errorExamples = cliGuide.slice(
      cliGuide.indexOf('Errors: every command'),
      cliGuide.indexOf('## horsies dev'),
    );
    const noDatabase = exampleAfter(errorExamples, 'npx horsies tasks list')[0];
    expect((await runCli(['tasks', 'list'], { DATABASE_URL: '' })).stderr.trim()).toBe(noDatabase);
    const badUrl = exampleAfter(errorExamples, 'DATABASE_URL=localhost npx horsies tasks list')[0];
    expect((await runCli(['tasks', 'list'], { DATABASE_URL: 'localhost' })).stderr.trim()).toBe(badUrl);
    const schema = freshSchemaName();
    const notMigrated = exampleAfter(errorExamples, 'npx horsies tasks list --schema fresh')[0];
    const run = await runCli(['tasks', 'list', '--schema', schema], env);
    expect(run.stderr.trim()).toBe(notMigrated?.replace('"fresh"', `"${schema}"`));
  });
});
