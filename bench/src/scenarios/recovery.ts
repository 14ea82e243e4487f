/**
 * Recovery: a worker process holding claimed tasks is killed with SIGKILL; how long until those tasks run on
 * another worker. The same thresholds apply to every peer that has such a mechanism (RECOVERY in main.ts).
 */
import type { Subject } from '../peers/types.js';
import { TimeoutError, closeQuietly, sleep, waitUntil, withTimeout } from '../time.js';
import { killGroup, spawnChild } from './children.js';
import { withSession, withWorker } from './common.js';
import { CONCURRENCY } from '../peers/types.js';
import type { Scenario } from './types.js';
import { SkipError } from './types.js';

const RECOVERY_TIMEOUT_MS = 120_000;

export const recoveryScenario: Scenario = {
  name: 'recovery',
  title: 'Crash recovery',
  unit: 's',
  method: (ctx) =>
    `A worker child process (concurrency 10) claims ${ctx.sizes.recoveryTasks} tasks whose handlers never ` +
    `return; a second worker in the harness process is then started and left idle for 1 s, and the child is ` +
    `killed with SIGKILL. The figures run from the kill to the first and to the last of those tasks starting ` +
    `on the second worker. Thresholds for every peer: a claim/lock/heartbeat lease of ` +
    `${ctx.recovery.leaseMs / 1000} s (renewed every ${ctx.recovery.leaseMs / 2000} s while the worker lives), ` +
    `a recovery check every ${ctx.recovery.checkIntervalMs / 1000} s, and an idle poll of ` +
    `${ctx.recovery.pollIntervalMs / 1000} s where the peer polls. Give-up after ${RECOVERY_TIMEOUT_MS / 1000} s.`,
  columns: () => [
    { key: 'first', label: 'first task running again', better: 'lower', decimals: 1 },
    { key: 'all', label: 'all tasks running again', better: 'lower', decimals: 1 },
  ],
  cases: () => [{ key: 'sigkill', label: 'SIGKILL' }],
  rows: (subjects: Subject[]) => subjects.map((subject) => ({ id: subject.id, subject })),
  defaultRounds: (quick) => (quick ? 1 : 3),
  timeoutMs: () => 60_000 + RECOVERY_TIMEOUT_MS + 60_000,
  async run(row, _c, ctx) {
    const { subject } = row;
    if (subject.recoveryNote) throw new SkipError(subject.recoveryNote.skip);
    const tasks = ctx.sizes.recoveryTasks;
    return withSession(
      subject,
      ctx,
      async (session) => {
        const handle = spawnChild(subject, ctx, {
          mode: 'hold',
          concurrency: CONCURRENCY,
          recovery: ctx.recovery,
          lifetimeMs: 600_000,
        });
        const started = new Set<number>();
        handle.onLine((line) => {
          const match = /^started (\d+)$/.exec(line);
          if (match) started.add(Number(match[1]));
        });
        try {
          await withTimeout(handle.ready, 60_000, `${subject.id}: recovery child start`);
          await session.enqueueBatch(0, tasks, tasks);
          await waitUntil(() => started.size >= tasks, {
            timeoutMs: 30_000,
            intervalMs: 20,
            what: `${subject.id}: child claiming ${tasks} tasks`,
          });
          const rerun = new Map<number, number>();
          const hooks = { onStart: (seq: number) => void rerun.set(seq, performance.now()) };
          return await withWorker(
            session,
            subject,
            hooks,
            async () => {
              await sleep(1000);
              if (rerun.size > 0)
                throw new Error(`${subject.id}: the second worker ran tasks before the kill`);
              const killedAt = performance.now();
              killGroup(handle.child);
              await withTimeout(handle.exited, 10_000, `${subject.id}: child exit after SIGKILL`);
              try {
                await waitUntil(() => rerun.size >= tasks, {
                  timeoutMs: RECOVERY_TIMEOUT_MS,
                  intervalMs: 20,
                  what: `${subject.id}: ${tasks} tasks running again`,
                });
              } catch (error) {
                if (error instanceof TimeoutError) {
                  throw new TimeoutError(
                    `${subject.id}: recovery (${rerun.size} of ${tasks} tasks ran again)`,
                    RECOVERY_TIMEOUT_MS,
                  );
                }
                throw error;
              }
              const times = [...rerun.values()].map((t) => (t - killedAt) / 1000);
              return {
                values: { first: Math.min(...times), all: Math.max(...times) },
                raw: { secondsAfterKill: times },
              };
            },
            ctx.recovery,
          );
        } finally {
          killGroup(handle.child);
          await closeQuietly(`${subject.id} recovery child`, () => handle.exited, 10_000);
        }
      },
      ctx.recovery,
    );
  },
};
