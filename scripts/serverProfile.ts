/**
 * Where a PostgreSQL server on this machine spends its CPU, sampled by Linux `perf` (for `profile:drain`'s
 * SERVER_PROFILE). The server's processes are sampled with DWARF call graphs (PostgreSQL is built without frame
 * pointers), and the report names the parts of the executor a queue's statements go through, each as a share of
 * the server's samples including what it calls. Needs `perf` on the PATH and the permission to sample another
 * process (root, or `kernel.perf_event_paranoid` at 1 or less).
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { processTree } from './processCpu.js';

/** The executor's parts a task's statements pass through, by the PostgreSQL function that does each. */
const PARTS: [fn: string, what: string][] = [
  ['ExecUpdate', 'updates of task rows (claims, starts, finishes)'],
  ['ExecInsert', 'inserts (attempt rows)'],
  ['ExecInsertIndexTuples', 'index entries of new row versions'],
  ['ExecLockRows', 'row locks (FOR UPDATE [SKIP LOCKED])'],
  ['RI_FKey_check', "foreign key checks (an attempt's task)"],
  ['ExecConstraints', 'CHECK constraints (the row rules)'],
  ['ExecARUpdateTriggers', 'AFTER UPDATE trigger conditions'],
  ['bttextcmp', 'text comparisons in btree indexes'],
  ['array_in', 'array parameters parsed'],
  ['printtup', 'rows sent to the client'],
  ['heap_vacuum_rel', 'vacuum'],
  ['CommitTransaction', 'commits'],
];

export interface ServerProfile {
  /** Stops sampling. */
  stop(): Promise<void>;
  /** Prints the report (after stop); `usPerTask` is the server's CPU per task, to turn shares into µs. */
  print(usPerTask: number): void;
}

/**
 * Starts sampling the server whose postmaster is `rootPid`, with every process below it now alive (other servers on
 * the machine are left out); null (with the reason printed) when `perf` cannot, or the server is not on this machine.
 */
export function startServerProfile(file: string, rootPid: number | null): ServerProfile | null {
  try {
    execFileSync('perf', ['--version'], { stdio: 'ignore' });
  } catch {
    console.log('server profile skipped: perf is not installed (Debian: apt-get install linux-perf)');
    return null;
  }
  if (rootPid === null) {
    console.log('server profile skipped: the server is not on this machine');
    return null;
  }
  const pids = processTree(rootPid);
  const perf: ChildProcess = spawn(
    'perf',
    ['record', '-F', '499', '--call-graph', 'dwarf,16384', '-p', pids.join(','), '-o', file],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let stderr = '';
  perf.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => perf.on('exit', resolve));
  return {
    async stop() {
      perf.kill('SIGINT');
      await exited;
    },
    print(usPerTask) {
      let report: string;
      try {
        const args = [
          'report',
          '-i',
          file,
          ...'--children --sort sym --stdio -g none --percent-limit 0'.split(' '),
        ];
        report = execFileSync('perf', args, {
          encoding: 'utf8',
          maxBuffer: 256 * 1024 * 1024,
          stdio: ['ignore', 'pipe', 'ignore'],
        });
      } catch {
        console.log(`server profile failed: ${stderr.trim().split('\n').at(-1) ?? 'perf report failed'}`);
        return;
      }
      printReport(report, usPerTask, file);
    },
  };
}

/** The parts' shares (including callees) of the samples in a `perf report --children` text. */
function printReport(report: string, usPerTask: number, file: string): void {
  const inclusive = new Map<string, number>();
  const self: [string, number][] = [];
  for (const line of report.split('\n')) {
    const m = /^\s+([\d.]+)%\s+([\d.]+)%\s+\[[.k]\]\s+(\S+)/.exec(line);
    if (!m) continue;
    inclusive.set(m[3]!, Math.max(inclusive.get(m[3]!) ?? 0, Number(m[1])));
    self.push([m[3]!, Number(m[2])]);
  }
  const samples = /^# Samples: (\S+)/m.exec(report)?.[1] ?? '?';
  console.log(
    `\nserver, sampled by perf (${samples} samples in ${file}): share of its CPU with what each part calls (so ` +
      'the parts overlap: an update includes its index entries and checks), and µs per task',
  );
  for (const [fn, what] of PARTS) {
    const share = inclusive.get(fn) ?? 0;
    console.log(
      `  ${share.toFixed(1).padStart(5)}%  ${((share / 100) * usPerTask).toFixed(1).padStart(5)} µs  ${what} (${fn})`,
    );
  }
  console.log('  most self time:');
  for (const [fn, share] of self.sort((a, b) => b[1] - a[1]).slice(0, 12)) {
    console.log(`  ${share.toFixed(1).padStart(5)}%  ${fn}`);
  }
}
