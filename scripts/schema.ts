/**
 * The committed schema dump, `src/db/schema.sql` (see src/db/schemaDump.ts). Migrates a fresh schema on
 * DATABASE_URL, or on an embedded PostgreSQL started for the run, and dumps it:
 *
 *   npm run schema:write   writes the dump to src/db/schema.sql
 *   npm run schema:check   compares; exits 1 with a line diff when the file is not the dump of a fresh migrate
 *
 * The fresh schema gets a random name and is dropped at the end.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Database } from '../src/db/Database.js';
import { migrate } from '../src/db/Migrator.js';
import { SchemaDrop, dumpSchema, schemaFileText } from '../src/db/schemaDump.js';
import { startEmbeddedServer } from '../src/dev/EmbeddedServer.js';

const SCHEMA_FILE = fileURLToPath(new URL('../src/db/schema.sql', import.meta.url));
const CONTEXT_LINES = 3;

/**
 * The dump of a fresh migrate on DATABASE_URL, or on an embedded server started for it (as scripts/database.ts
 * does, without loading the whole library: the check runs in `npm run check` and should start quickly).
 */
async function dumpOfFreshMigrate(): Promise<string> {
  const fromEnv = process.env.DATABASE_URL;
  if (fromEnv) return freshDump(fromEnv);
  const dataDir = mkdtempSync(join(tmpdir(), 'horsies-schema-'));
  const server = await startEmbeddedServer({ dataDir, persistent: false });
  try {
    return await freshDump(server.url);
  } finally {
    await server.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

async function freshDump(url: string): Promise<string> {
  const db = new Database({
    connectionString: url,
    schema: `schema_dump_${randomBytes(4).toString('hex')}`,
    poolSize: 2,
  });
  try {
    await migrate(db);
    return schemaFileText(await dumpSchema(db));
  } finally {
    await db.run(SchemaDrop, {}).catch(() => undefined);
    await db.end();
  }
}

/** Writes or checks the file; resolves with the exit code. */
async function main(): Promise<number> {
  const args = process.argv.slice(2);
  const unknown = args.filter((a) => a !== '--write');
  if (unknown.length > 0)
    throw new Error(`unknown argument ${unknown.join(' ')}; usage: schema.ts [--write]`);
  const write = args.includes('--write');
  const dump = await dumpOfFreshMigrate();
  const file = relative(process.cwd(), SCHEMA_FILE);
  if (write) {
    writeFileSync(SCHEMA_FILE, dump);
    console.log(`wrote ${file}`);
    return 0;
  }
  let committed = '';
  try {
    committed = readFileSync(SCHEMA_FILE, 'utf8');
  } catch {
    // missing: every line of the dump shows as added
  }
  if (committed === dump) {
    console.log(`${file} matches a fresh migrate`);
    return 0;
  }
  console.error(`${file} is not the schema a fresh migrate creates:\n`);
  console.error(unifiedDiff(committed, dump, `a/${file}`, `b/${file} (fresh migrate)`));
  console.error(
    `\nIf the change is intended, update the file with \`npm run schema:write\` and commit it with the migration.` +
      `\nThe file is written against the embedded server: on DATABASE_URL, another major version of PostgreSQL may` +
      `\nprint some definitions differently.`,
  );
  return 1;
}

/**
 * A unified diff of two texts by lines, with {@link CONTEXT_LINES} lines of context: the common head and tail are
 * cut first, and the longest common subsequence of what remains aligns the rest.
 */
function unifiedDiff(before: string, after: string, beforeName: string, afterName: string): string {
  const a = before.split('\n');
  const b = after.split('\n');
  let head = 0;
  while (head < a.length && head < b.length && a[head] === b[head]) head++;
  let tail = 0;
  while (
    tail < a.length - head &&
    tail < b.length - head &&
    a[a.length - 1 - tail] === b[b.length - 1 - tail]
  ) {
    tail++;
  }
  const edits: Array<{ op: ' ' | '-' | '+'; line: string; ai: number; bi: number }> = [];
  for (let i = 0; i < head; i++) edits.push({ op: ' ', line: a[i]!, ai: i, bi: i });
  const midA = a.slice(head, a.length - tail);
  const midB = b.slice(head, b.length - tail);
  // lcs[i][j]: length of the longest common subsequence of midA[i..] and midB[j..].
  const width = midB.length + 1;
  const lcs = new Uint32Array((midA.length + 1) * width);
  for (let i = midA.length - 1; i >= 0; i--) {
    for (let j = midB.length - 1; j >= 0; j--) {
      lcs[i * width + j] =
        midA[i] === midB[j]
          ? lcs[(i + 1) * width + j + 1]! + 1
          : Math.max(lcs[(i + 1) * width + j]!, lcs[i * width + j + 1]!);
    }
  }
  let i = 0;
  let j = 0;
  while (i < midA.length || j < midB.length) {
    if (i < midA.length && j < midB.length && midA[i] === midB[j]) {
      edits.push({ op: ' ', line: midA[i]!, ai: head + i, bi: head + j });
      i++;
      j++;
    } else if (
      i < midA.length &&
      (j === midB.length || lcs[(i + 1) * width + j]! >= lcs[i * width + j + 1]!)
    ) {
      // Removals before additions, as diff prints them.
      edits.push({ op: '-', line: midA[i]!, ai: head + i, bi: head + j });
      i++;
    } else {
      edits.push({ op: '+', line: midB[j]!, ai: head + i, bi: head + j });
      j++;
    }
  }
  for (let k = 0; k < tail; k++) {
    edits.push({ op: ' ', line: a[a.length - tail + k]!, ai: a.length - tail + k, bi: b.length - tail + k });
  }
  // Hunks: runs of changes with the context around them, merged where the context would overlap.
  const out = [`--- ${beforeName}`, `+++ ${afterName}`];
  const changed = edits.flatMap((e, index) => (e.op === ' ' ? [] : [index]));
  let k = 0;
  while (k < changed.length) {
    const start = Math.max(0, changed[k]! - CONTEXT_LINES);
    let end = changed[k]!;
    while (k < changed.length && changed[k]! - end <= 2 * CONTEXT_LINES) end = changed[k++]!;
    end = Math.min(edits.length - 1, end + CONTEXT_LINES);
    const hunk = edits.slice(start, end + 1);
    const first = hunk[0]!;
    const aCount = hunk.filter((e) => e.op !== '+').length;
    const bCount = hunk.filter((e) => e.op !== '-').length;
    out.push(`@@ -${first.ai + 1},${aCount} +${first.bi + 1},${bCount} @@`);
    for (const e of hunk) out.push(`${e.op}${e.line}`);
  }
  return out.join('\n');
}

// Exits explicitly: the embedded server's package and pools may hold the process open.
main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
