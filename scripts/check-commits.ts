/**
 * The commit convention (docs/development.md#commits), checked on every commit since the 0.1 line
 * (`npm run check:commits`, in `npm run check`): a subject `area: imperative summary` of at most 72 characters,
 * the area lowercase (a folder: `worker`, `db`, `docs`, `bench`...; `a/b` or `a, b` for two). Prints one line per
 * commit that breaks it and exits 1. `--message <text>` checks one subject instead (for a hook, or to try one).
 *
 * The base: 0.1.0 was never tagged; its last commit is d11044d. A clone without it (a shallow one) is not checked,
 * and says so. A tag `v0.2.0` will be the base of the next release's check.
 */
import { execFileSync } from 'node:child_process';

const BASE = 'd11044d';
const MAX = 72;
const SUBJECT = /^[a-z][a-z0-9-]*(\/[a-z0-9.-]+)*(, [a-z][a-z0-9/.-]*)*: \S/;

/**
 * Subjects over 72 characters committed before this check existed: a shared history is not rewritten. Nothing may
 * be added here.
 */
const GRANDFATHERED = new Set([
  '2fa1250', // 74
  'd91eafa', // 73
  '06740ea', // 74
  '94aa557', // 80
  'b9e9735', // 73
  'a872760', // 73, committed while the check was on its way
]);

/** What is wrong with a subject, or null. */
function problem(subject: string): string | null {
  const length = [...subject].length;
  if (!SUBJECT.test(subject)) return 'not `area: summary` (a lowercase area, a colon and a space, a summary)';
  if (length > MAX) return `${length} characters, at most ${MAX}`;
  if (subject.endsWith('.')) return 'ends with a full stop';
  return null;
}

const at = process.argv.indexOf('--message');
if (at >= 0) {
  const subject = (process.argv[at + 1] ?? '').split('\n')[0]!;
  const why = problem(subject);
  if (why) {
    console.error(`commits: "${subject}": ${why}`);
    process.exitCode = 1;
  }
} else {
  const git = (...args: string[]): string => execFileSync('git', args, { encoding: 'utf8' });
  let known = true;
  try {
    git('cat-file', '-e', `${BASE}^{commit}`);
  } catch {
    known = false;
  }
  if (!known) {
    console.log(`commits: ${BASE} (the 0.1 line) is not in this clone: not checked`);
  } else {
    const log = git('log', '--no-merges', '--format=%H%x00%s', `${BASE}..HEAD`).split('\n').filter(Boolean);
    let bad = 0;
    for (const line of log) {
      const [hash = '', subject = ''] = line.split('\0');
      if ([...GRANDFATHERED].some((g) => hash.startsWith(g))) continue;
      const why = problem(subject);
      if (why) {
        console.error(`commits: ${hash.slice(0, 7)} "${subject}": ${why}`);
        bad++;
      }
    }
    if (bad) process.exitCode = 1;
  }
}
