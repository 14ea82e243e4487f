/**
 * A server's processes on this machine and their CPU time, read from /proc: for the profile of a drain and the
 * benchmark's cost per task. Linux only.
 */
import { readFileSync, readdirSync } from 'node:fs';

/** The ids of the processes named `comm` now alive. */
export function processIds(comm: string): string[] {
  return readdirSync('/proc').filter((pid) => {
    if (!/^\d+$/.test(pid)) return false;
    try {
      return readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === comm;
    } catch {
      return false; // the process ended meanwhile
    }
  });
}

/** CPU time (ms) of every process named `comm` (`postgres`, `redis-server`), with what their exited children used. */
export function processCpuMs(comm: string): number {
  let ticks = 0;
  for (const pid of processIds(comm)) {
    try {
      // utime, stime, cutime and cstime.
      const fields = statFields(`/proc/${pid}/stat`);
      ticks += [11, 12, 13, 14].reduce((sum, i) => sum + Number(fields[i]), 0);
    } catch {
      // the process ended meanwhile
    }
  }
  return ticks * 10; // USER_HZ is 100 on Linux
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
