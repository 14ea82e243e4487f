/**
 * A server's processes on this machine and their CPU time, read from /proc: for the profile of a drain and the
 * benchmark's cost per task. Linux only.
 */
import { readFileSync, readdirSync } from 'node:fs';

/**
 * The postmaster of the PostgreSQL server a backend belongs to (the backend's parent process), or null when that
 * backend is not a `postgres` process on this machine (a server elsewhere). `backendPid` is what
 * `SELECT pg_backend_pid()` returns on a connection to the server.
 */
export function postmasterPid(backendPid: number): number | null {
  try {
    if (readFileSync(`/proc/${backendPid}/comm`, 'utf8').trim() !== 'postgres') return null;
    // The parent's id is the 4th field of the stat file (index 1 after the command).
    const parent = Number(statFields(`/proc/${backendPid}/stat`)[1]);
    return readFileSync(`/proc/${parent}/comm`, 'utf8').trim() === 'postgres' ? parent : null;
  } catch {
    return null; // no such process here
  }
}

/**
 * CPU time (ms) of one server: the process `rootPid` (a postmaster, a `redis-server`) and every process below it,
 * with what their exited children used. Other servers on the machine (another test run's, say) are not counted.
 * Null (a server not on this machine) counts nothing.
 */
export function processTreeCpuMs(rootPid: number | null): number {
  if (rootPid === null) return 0;
  const { ticks } = processTable();
  const total = processTree(rootPid).reduce((sum, pid) => sum + (ticks.get(pid) ?? 0), 0);
  return total * 10; // USER_HZ is 100 on Linux
}

/** The process `rootPid` (a postmaster) and every process below it now alive. */
export function processTree(rootPid: number): number[] {
  const { children } = processTable();
  const tree: number[] = [];
  const pending = [rootPid];
  for (let pid = pending.pop(); pid !== undefined; pid = pending.pop()) {
    tree.push(pid);
    pending.push(...(children.get(pid) ?? []));
  }
  return tree;
}

// Every process now alive: its children, and its CPU ticks with what its exited children used.
function processTable(): { children: Map<number, number[]>; ticks: Map<number, number> } {
  const children = new Map<number, number[]>();
  const ticks = new Map<number, number>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const fields = statFields(`/proc/${entry}/stat`);
      const pid = Number(entry);
      const parent = Number(fields[1]);
      children.set(parent, [...(children.get(parent) ?? []), pid]);
      // utime, stime, cutime and cstime.
      ticks.set(
        pid,
        [11, 12, 13, 14].reduce((sum, i) => sum + Number(fields[i]), 0),
      );
    } catch {
      // the process ended meanwhile
    }
  }
  return { children, ticks };
}

/**
 * CPU time (ms) of this process's main thread and of its other threads (V8's compiler and garbage collector
 * helpers, libuv's pool), read from /proc/self/task. Threads that ended are not counted.
 */
export function threadCpuMs(): { main: number; others: number } {
  const cpu = { main: 0, others: 0 };
  for (const tid of readdirSync('/proc/self/task')) {
    try {
      // utime and stime.
      const fields = statFields(`/proc/self/task/${tid}/stat`);
      const ms = (Number(fields[11]) + Number(fields[12])) * 10;
      if (tid === String(process.pid)) cpu.main += ms;
      else cpu.others += ms;
    } catch {
      // the thread ended meanwhile
    }
  }
  return cpu;
}

/**
 * The fields of a /proc stat file after the command (which may hold spaces and parentheses): utime is the 12th
 * (index 11), stime the 13th, cutime and cstime the 14th and 15th, in clock ticks.
 */
function statFields(path: string): string[] {
  const stat = readFileSync(path, 'utf8');
  return stat.slice(stat.lastIndexOf(') ') + 2).split(' ');
}
