/**
 * The scheduler: sends one task per due slot of each declared schedule, exactly once across any number of
 * schedulers. One pass reads `now` once (the injected clock, else the database's), reads the state rows of all
 * schedules without locking, and opens a transaction only for the schedules that need one:
 *
 * ```
 *   no row ──────────────► insert it, next run = first slot after now (a new schedule never fires at once)
 *   hash changed / next null ► next run = first slot after now (new pattern or zone; resumed; re-enabled)
 *   paused / disabled ─────► nothing (a disabled schedule's next run is cleared once)
 *   next run > now ────────► nothing
 *   next run <= now ───────► send the due slots, then next run = first slot after now
 * ```
 *
 * A schedule's row is locked `FOR UPDATE SKIP LOCKED` for the whole transaction: the slot tasks (id derived from
 * the schedule's name and the slot, `sent_at` = the slot) are inserted in it and the row's update commits with
 * them, so a scheduler that dies in between leaves neither behind, and one that finds the row locked moves on.
 * Due slots: the latest one only, or with `catchUp` every missed one (the latest `maxCatchUpRuns`), oldest first.
 * A send that fails rolls the schedule's transaction back, so the slot is tried again next pass; the failure is
 * logged, stored on the row and reported, and the other schedules go on.
 */
import { EventEmitter } from 'node:events';
import { pino } from 'pino';
import type { Logger } from 'pino';
import { v5 as uuidv5 } from 'uuid';
import { z } from 'zod';
import { databaseClock } from '../clock.js';
import type { Clock } from '../clock.js';
import { toProblems } from '../config.js';
import type { Database, Queryable } from '../db/Database.js';
import {
  ClockNowGet,
  ScheduleStateAdvance,
  ScheduleStateGetMany,
  ScheduleStateInsert,
  ScheduleStateLock,
  ScheduleStateRecordError,
  ScheduleStateReset,
} from '../db/schedules.js';
import type { ScheduleStateRow } from '../db/schedules.js';
import { ConfigError } from '../errors.js';
import type { ConfigProblem } from '../errors.js';
import { declareSchedules } from './declare.js';
import type { Schedule, ScheduleConfig, TaskLookup } from './declare.js';

/** Settings of a {@link Scheduler}. */
export interface SchedulerConfig {
  /** The schedules to run. Validated when the scheduler is made (one ConfigError lists every problem). */
  schedules: readonly ScheduleConfig[];
  /** Tasks that schedules name by string (`app.tasks`). Default: none. */
  tasks?: TaskLookup | undefined;
  /** The app's queues, to check each schedule's queue when it is declared. Default: checked at each send. */
  queues?: readonly string[] | undefined;
  /**
   * Longest time between passes, in milliseconds. The loop wakes sooner when a slot falls due sooner, so this
   * bounds the delay only after a failure, a busy schedule or a pause/resume done elsewhere. Default 1000.
   */
  checkIntervalMs?: number | undefined;
  /** Where failures and catch-ups are logged. Default: a pino logger named `horsies`. */
  logger?: Logger | undefined;
  /** Source of `now`. Default: the database clock, read once per pass. */
  clock?: Clock | undefined;
  /**
   * @internal Called inside a schedule's transaction after its slot tasks are inserted and before its state row
   * is updated (crash tests pause a scheduler process here).
   */
  beforeStateUpdate?: ((schedule: string, slots: readonly Date[]) => Promise<void>) | undefined;
}

/** One task a pass sent. */
export interface SentSlot {
  schedule: string;
  /** The slot the task stands for (its `sent_at`). */
  slot: Date;
  taskId: string;
}

/** A slot a pass could not send. The schedule did not advance: the slot is tried again next pass. */
export interface FailedSlot {
  schedule: string;
  /**
   * The slot whose send failed (the last one sent, when the state update failed after them); the pass's `now`
   * when the schedule's transaction failed before any send.
   */
  slot: Date;
  /** The error of the send (an InputValidationError, a PayloadMismatchError, a database error...). */
  error: unknown;
}

/** What one {@link Scheduler.runOnce} did. */
export interface SchedulerResult {
  /** The `now` the pass compared with. */
  now: Date;
  /** Tasks sent, by schedule, oldest slot first. */
  sent: SentSlot[];
  /** Schedules seen for the first time, with their first slot. */
  started: Array<{ schedule: string; nextRunAt: Date | null }>;
  /** Schedules whose next run was computed afresh (pattern or zone changed, resumed, re-enabled). */
  recomputed: Array<{ schedule: string; nextRunAt: Date | null }>;
  /** Slots whose send failed. */
  failed: FailedSlot[];
  /** Schedules skipped because another scheduler held their row. */
  busy: string[];
  /** The earliest next run after `now` among the schedules this pass saw, or null. */
  nextRunAt: Date | null;
}

/** Events of a {@link Scheduler}. */
export interface SchedulerEvents {
  /** A pass finished. */
  'scheduler:ran': [result: SchedulerResult];
  /** A pass failed as a whole (the database could not be reached). */
  'scheduler:error': [error: unknown];
}

const configSchema = z.object({
  checkIntervalMs: z.number().int().min(10).max(3_600_000).default(1000),
});

/** Fixed namespace of the slot task ids (UUIDv5 of the schedule's name and the slot). */
const SLOT_ID_NAMESPACE = '0935e1bd-8795-4071-8c89-507e5820022f';

/** The id of the task that stands for `slot` of schedule `name`: the same in every process. */
export function slotTaskId(name: string, slot: Date): string {
  return uuidv5(`${name}\n${slot.toISOString()}`, SLOT_ID_NAMESPACE);
}

/** What {@link createScheduler} needs of an app: an {@link App} is one. */
export interface SchedulerHost {
  /** @internal The database seam. */
  readonly db: Database;
  readonly schedules: readonly ScheduleConfig[];
  readonly tasks: TaskLookup;
  readonly config: { readonly queues: readonly string[] };
  readonly logger: Logger;
}

/** Settings of {@link createScheduler}: the scheduler's own, the app gives the rest. */
export type CreateSchedulerOptions = Pick<SchedulerConfig, 'checkIntervalMs' | 'clock' | 'logger'>;

/**
 * A scheduler for the app's declared schedules (`app.schedule()`, `createApp({ schedules })`), for a process that
 * runs it alone or a test that drives it: `start()` and `stop()`, or `runOnce()` pass by pass, with a
 * `ManualClock` as `clock` to pin time. Workers' maintenance leaders run one already.
 */
export function createScheduler(app: SchedulerHost, options: CreateSchedulerOptions = {}): Scheduler {
  return new Scheduler(app.db, {
    schedules: app.schedules,
    tasks: app.tasks,
    queues: app.config.queues,
    logger: options.logger ?? app.logger,
    checkIntervalMs: options.checkIntervalMs,
    clock: options.clock,
  });
}

/** Shortest wait between passes of the loop, so a clock that lags the database's cannot make it spin. */
const MIN_WAIT_MS = 5;

/** Sends the due slots of declared schedules. See the module comment for the rules. */
export class Scheduler extends EventEmitter<SchedulerEvents> {
  /** The service's name in the maintenance leader's list. */
  readonly name = 'scheduler';
  /** The validated schedules. */
  readonly schedules: readonly Schedule[];
  /** Longest time between passes. */
  readonly checkIntervalMs: number;
  private readonly logger: Logger;
  private readonly clock: Clock;
  private running: Promise<SchedulerResult> | null = null;
  private loop: Promise<void> | null = null;
  private wake: (() => void) | null = null;
  private stopped = true;
  private restart = false;

  /** @internal Made by {@link createScheduler}, which passes the app's database and declared schedules. */
  constructor(
    private readonly db: Database,
    private readonly config: SchedulerConfig,
  ) {
    super();
    const problems: ConfigProblem[] = [];
    const parsed = configSchema.safeParse({ checkIntervalMs: config.checkIntervalMs });
    if (!parsed.success) problems.push(...toProblems(parsed.error.issues, config));
    let schedules: Schedule[] = [];
    try {
      schedules = declareSchedules(config.schedules, { tasks: config.tasks, queues: config.queues });
    } catch (error) {
      if (!(error instanceof ConfigError)) throw error;
      problems.push(...error.problems);
    }
    if (!parsed.success || problems.length > 0) throw new ConfigError('scheduler config', problems);
    this.schedules = schedules;
    this.checkIntervalMs = parsed.data.checkIntervalMs;
    this.logger = config.logger ?? pino({ name: 'horsies' });
    this.clock = config.clock ?? databaseClock;
  }

  /**
   * Starts the loop: a pass now, then one whenever a slot falls due, at most `checkIntervalMs` apart. A start while
   * a stop is under way (leadership lost and regained at once) starts the loop again once the old one has ended.
   */
  start(): void {
    if (this.loop) {
      // Running: nothing to do. Stopping: start again once the old loop has ended.
      if (this.stopped) this.restart = true;
      return;
    }
    this.stopped = false;
    this.loop = this.runLoop().finally(() => {
      this.loop = null;
      if (this.restart) {
        this.restart = false;
        this.start();
      }
    });
  }

  /** Stops the loop (and a start asked for while it stopped) and waits for a pass under way. Idempotent. */
  async stop(): Promise<void> {
    this.restart = false;
    this.stopped = true;
    this.wake?.();
    await this.loop;
    await this.running?.catch(() => undefined);
  }

  /** One pass over every schedule. A pass already under way is joined, not doubled. */
  runOnce(): Promise<SchedulerResult> {
    this.running ??= this.pass().finally(() => {
      this.running = null;
    });
    return this.running;
  }

  private async runLoop(): Promise<void> {
    while (!this.stopped) {
      const startedAt = Date.now();
      let waitMs = this.checkIntervalMs;
      try {
        const result = await this.runOnce();
        if (result.nextRunAt !== null) {
          const untilNext = result.nextRunAt.getTime() - result.now.getTime() - (Date.now() - startedAt);
          waitMs = Math.max(MIN_WAIT_MS, Math.min(waitMs, untilNext));
        }
      } catch (error) {
        this.logger.error({ err: error }, 'scheduler pass failed');
        this.emit('scheduler:error', error);
      }
      if (this.stopped) break;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, waitMs);
        this.wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.wake = null;
    }
  }

  private async pass(): Promise<SchedulerResult> {
    const now = this.clock.now() ?? (await this.db.run(ClockNowGet, {}))[0]?.now;
    if (!now) throw new Error('the database returned no time');
    const result: SchedulerResult = {
      now,
      sent: [],
      started: [],
      recomputed: [],
      failed: [],
      busy: [],
      nextRunAt: null,
    };
    const rows = new Map(
      (await this.db.run(ScheduleStateGetMany, { names: this.schedules.map((s) => s.name) })).map((r) => [
        r.schedule_name,
        r,
      ]),
    );
    for (const schedule of this.schedules) {
      const row = rows.get(schedule.name);
      if (!this.needsWork(schedule, row, now)) {
        if (row && !row.paused && schedule.enabled) this.noteNext(result, row.next_run_at);
        continue;
      }
      await this.visit(schedule, now, result);
    }
    this.emit('scheduler:ran', result);
    return result;
  }

  private needsWork(schedule: Schedule, row: ScheduleStateRow | undefined, now: Date): boolean {
    if (!schedule.enabled) return row !== undefined && row.next_run_at !== null;
    if (!row) return true;
    if (row.paused) return false;
    return row.config_hash !== schedule.configHash || row.next_run_at === null || row.next_run_at <= now;
  }

  private noteNext(result: SchedulerResult, next: Date | null): void {
    if (next === null || next <= result.now) return;
    if (result.nextRunAt === null || next < result.nextRunAt) result.nextRunAt = next;
  }

  /** One schedule's transaction. Failures are caught here, so the other schedules go on. */
  private async visit(schedule: Schedule, now: Date, result: SchedulerResult): Promise<void> {
    // The slot last sent (or being sent) when the transaction fails, for the report.
    const sending: { slot: Date | null } = { slot: null };
    try {
      await this.db.transaction(async (client) => {
        const [row] = await this.db.run(ScheduleStateLock, { name: schedule.name }, client);
        if (!row) return this.create(schedule, now, result, client);
        // The unlocked read may be stale: decide again on the locked row.
        if (!schedule.enabled || row.paused) {
          if (!schedule.enabled && row.next_run_at !== null) {
            await this.reset(schedule, row.config_hash, null, client);
          }
          return;
        }
        if (row.config_hash !== schedule.configHash || row.next_run_at === null) {
          const nextRunAt = schedule.slots.next(now);
          await this.reset(schedule, schedule.configHash, nextRunAt, client);
          result.recomputed.push({ schedule: schedule.name, nextRunAt });
          this.noteNext(result, nextRunAt);
          return;
        }
        if (row.next_run_at > now) return this.noteNext(result, row.next_run_at);
        await this.sendDue(schedule, row.next_run_at, row.last_error !== null, now, result, client, sending);
      });
    } catch (error) {
      const slot = sending.slot ?? now;
      result.failed.push({ schedule: schedule.name, slot, error });
      await this.recordFailure(schedule, slot, error, now);
    }
  }

  /** Creates the row of a schedule seen for the first time; another scheduler may have been first. */
  private async create(
    schedule: Schedule,
    now: Date,
    result: SchedulerResult,
    client: Queryable,
  ): Promise<void> {
    const nextRunAt = schedule.enabled ? schedule.slots.next(now) : null;
    const [created] = await this.db.run(
      ScheduleStateInsert,
      { name: schedule.name, configHash: schedule.configHash, nextRunAt },
      client,
    );
    if (!created) {
      result.busy.push(schedule.name);
      return;
    }
    result.started.push({ schedule: schedule.name, nextRunAt });
    this.noteNext(result, nextRunAt);
  }

  private async reset(
    schedule: Schedule,
    configHash: string | null,
    nextRunAt: Date | null,
    client: Queryable,
  ): Promise<void> {
    await this.db.run(ScheduleStateReset, { name: schedule.name, configHash, nextRunAt }, client);
  }

  /** Sends the due slots' tasks and advances the row, all in the schedule's transaction. */
  private async sendDue(
    schedule: Schedule,
    from: Date,
    hadError: boolean,
    now: Date,
    result: SchedulerResult,
    client: Queryable,
    sending: { slot: Date | null },
  ): Promise<void> {
    const slots = dueSlots(schedule, from, now);
    const sent: SentSlot[] = [];
    for (const slot of slots) {
      sending.slot = slot;
      const task = await schedule.task.send(schedule.input as never, {
        id: slotTaskId(schedule.name, slot),
        queue: schedule.queue,
        priority: schedule.priority,
        sentAt: slot,
        tx: client,
      });
      sent.push({ schedule: schedule.name, slot, taskId: task.id });
    }
    await this.config.beforeStateUpdate?.(schedule.name, slots);
    const last = sent[sent.length - 1] as SentSlot;
    const nextRunAt = schedule.slots.next(now);
    await this.db.run(
      ScheduleStateAdvance,
      { name: schedule.name, lastRunAt: last.slot, lastTaskId: last.taskId, runs: sent.length, nextRunAt },
      client,
    );
    if (sent.length > 1 || hadError) {
      this.logger.info(
        { schedule: schedule.name, slots: sent.length, first: sent[0]?.slot, last: last.slot },
        sent.length > 1 ? 'schedule caught up' : 'schedule sends again',
      );
    }
    result.sent.push(...sent);
    this.noteNext(result, nextRunAt);
  }

  // The row keeps the last error until a send succeeds; the log gets it when it changes, not every pass.
  private async recordFailure(schedule: Schedule, slot: Date, error: unknown, now: Date): Promise<void> {
    const message = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
    try {
      const [row] = await this.db.run(ScheduleStateGetMany, { names: [schedule.name] });
      if (row?.last_error !== message) {
        this.logger.error(
          { err: error, schedule: schedule.name, slot },
          'scheduled send failed; the slot is tried again next pass',
        );
      }
      await this.db.run(ScheduleStateRecordError, { name: schedule.name, error: message, now });
    } catch (recordError) {
      this.logger.error(
        { err: error, recordError, schedule: schedule.name, slot },
        'scheduled send failed, and so did recording it',
      );
    }
  }
}

/**
 * The slots a schedule sends when its next run (`from`, itself a slot) is at or before `now`: the latest slot at
 * or before `now`, or with catch-up the latest `maxCatchUpRuns` of them, oldest first. `from` is sent itself when
 * the rule finds no slot in between (a row written by another version of the rules).
 */
export function dueSlots(schedule: Schedule, from: Date, now: Date): Date[] {
  const limit = schedule.catchUp ? schedule.maxCatchUpRuns : 1;
  const slots: Date[] = [];
  let slot = schedule.slots.previous(now);
  while (slot !== null && slot >= from) {
    slots.push(slot);
    if (slots.length === limit) break;
    slot = schedule.slots.previous(new Date(slot.getTime() - 1));
  }
  if (slots.length === 0) slots.push(from);
  return slots.reverse();
}
