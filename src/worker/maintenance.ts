/**
 * A worker's maintenance side: the leader campaign, the services a pass runs (services.ts), and the loops that keep
 * their own timers while this worker leads (the scheduler, due to the second; the vacuum check). What they do is
 * reported as the worker's events (`maintenance:ran`, `leader:elected`, `leader:lost`).
 */
import type { EventEmitter } from 'node:events';
import type { StandardSchemaV1 } from '@standard-schema/spec';
import type { Logger } from 'pino';
import type { TaskDefinition } from '../client/TaskDefinition.js';
import { Scheduler } from '../scheduler/Scheduler.js';
import type { ScheduleConfig } from '../scheduler/declare.js';
import { MaintenanceLeader } from '../recovery/MaintenanceLeader.js';
import type { MaintenanceLeaderEvents } from '../recovery/MaintenanceLeader.js';
import { maintenanceServices, vacuumLoop } from '../recovery/services.js';
import type { MaintenanceContext } from '../recovery/services.js';

/** What a worker's maintenance is made of, beyond the services' context. */
export interface MaintenanceSettings {
  /** The candidate's id in the election: the worker's. */
  candidateId: string;
  /** Recurring tasks the leader sends. */
  schedules: readonly ScheduleConfig[];
  tasks: ReadonlyMap<string, TaskDefinition<StandardSchemaV1, unknown>>;
  /** The app's queues, for the schedules' checks. */
  queues: readonly string[];
}

/** The maintenance leader of one worker, its loops and events wired. */
export function maintenanceLeader(
  ctx: MaintenanceContext,
  settings: MaintenanceSettings,
  events: Pick<EventEmitter<MaintenanceLeaderEvents>, 'emit'>,
  logger: Logger,
): MaintenanceLeader {
  const { db, clock } = ctx;
  const ran = (service: string, result: unknown): void =>
    void events.emit('maintenance:ran', service, result);
  const scheduler =
    settings.schedules.length > 0
      ? new Scheduler(db, {
          schedules: settings.schedules,
          tasks: settings.tasks,
          queues: settings.queues,
          logger,
          clock,
        })
      : null;
  scheduler?.on('scheduler:ran', (result) => ran('scheduler', result));
  const vacuum = vacuumLoop(ctx, logger);
  vacuum?.on('maintenance:ran', ran);
  const leader = new MaintenanceLeader(
    db,
    { candidateId: settings.candidateId, checkIntervalMs: ctx.recovery.checkIntervalMs },
    maintenanceServices(ctx),
    logger,
    [scheduler, vacuum].filter((loop) => loop !== null),
  );
  for (const event of ['leader:elected', 'leader:lost'] as const) {
    leader.on(event, () => {
      ctx.metrics?.setLeader(event === 'leader:elected');
      events.emit(event);
    });
  }
  leader.on('maintenance:ran', ran);
  return leader;
}
