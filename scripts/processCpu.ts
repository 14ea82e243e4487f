/**
 * CPU time of a server on this machine, read from /proc: for the profile of a drain and the benchmark's cost per
 * task. Linux only.
 */
import { readFileSync, readdirSync } from 'node:fs';

/** CPU time (ms) of every process named `comm` (`postgres`, `redis-server`), with what their exited children used. */
export function processCpuMs(comm: string): number {
  let ticks = 0;
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      if (readFileSync(`/proc/${pid}/comm`, 'utf8').trim() !== comm) continue;
      // After the command: utime, stime, cutime and cstime are the 12th to the 15th fields.
      const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
      ticks += [11, 12, 13, 14].reduce((sum, i) => sum + Number(fields[i]), 0);
    } catch {
      // the process ended meanwhile
    }
  }
  return ticks * 10; // USER_HZ is 100 on Linux
}
