/**
 * The producer's start queue: claimed tasks wait here for a slot, and start when one frees up. The slots themselves
 * are counted in the worker's SlotLedger; this part decides which waiting tasks take them.
 *
 * Starts go out in batches (runs that end in the same turn of the event loop start their successors in one
 * statement), respect each task's per-worker limit, and, in soft cap mode, pass the cap's gate: what finds no
 * room waits until room may have opened (an outcome written here, a task finished elsewhere) or for a retry that
 * backs off from 1 ms to the poll interval while nothing happens. When nothing is waiting and no limit or
 * gate applies, the producer's claim may start tasks itself in free slots it reserves here (`reserveStarts`).
 */
import type { StandardSchemaV1 } from '@standard-schema/spec';
import type { Logger } from 'pino';
import type { TaskDefinition } from '../client/TaskDefinition.js';
import type { HeartbeatRole } from '../db/liveness.js';
import type { ClaimedTaskRow, TaskStartRow } from '../db/tasks.js';
import type { ClaimStrategies, ClaimStrategy, PrefetchedStart } from './claim/ClaimStrategy.js';
import type { Executor } from './Executor.js';
import type { Phase, SlotLedger } from './SlotLedger.js';
import { TestSignal } from './TestSignal.js';

/** Tasks a claim started in the same round trip (`TaskClaimAndStart`), with the slots reserved for them. */
export interface StartedWithClaim {
  /** The tasks the claim tried to start, in claim order. */
  tasks: ClaimedTaskRow[];
  /** The start rows; a task missing here was lost before it started. */
  rows: TaskStartRow[];
  /** Slots reserved by {@link Dispatcher.reserveStarts} (at least `tasks.length`). */
  reserved: number;
}

/** Settings of a {@link Dispatcher}. */
export interface DispatcherOptions {
  /** Longest wait before starts the soft cap deferred try again with nothing heard meanwhile (the poll interval). */
  retryMs: number;
  /** Claimed tasks waiting longer than this for a slot are handed back (see WorkerConfig.prefetch.holdMs); 0: never. */
  holdMs: number;
}

/** What the dispatcher needs of the executor. */
export type Launcher = Pick<Executor, 'launch' | 'stop'>;

/** Points of the start queue a test can wait for (see TestSignal). */
export interface DispatcherSignals {
  /** Tasks wait for a slot, but none may be handed back (a rate limiter or a soft cap holds them): no hold timer. */
  holdNotArmed: TestSignal;
  /** A soft cap had no room for a start: it is tried again in this many ms, unless room opens first. */
  capRetry: TestSignal<number>;
}

/** Starts a worker's claimed tasks as slots free up. */
export class Dispatcher {
  /** Claimed tasks waiting for a slot, in claim order. */
  private waiting: ClaimedTaskRow[] = [];
  private readonly starts = new Set<Promise<void>>();
  private scheduled = false;
  /**
   * Soft cap: queues whose last start found no room. Their tasks are not offered again until room may have opened
   * ({@link capRoomMayHaveOpened}) or the retry timer fires; other queues' starts go on.
   */
  private readonly capBlocked = new Set<string>();
  private capRetryTimer: NodeJS.Timeout | null = null;
  /** Wait before the next retry of a start the cap deferred; doubles, up to `retryMs`, while nothing is heard. */
  private capRetryMs = 0;
  private active = true;
  /** Claimed tasks a rate limiter deferred, by id: not offered to a start again before this time (ms). */
  private readonly notBefore = new Map<string, number>();
  private holdTimer: NodeJS.Timeout | null = null;
  /** Claims put aside until the earlier run of their task has left this worker (see claimedAgain), by id. */
  private readonly successors = new Map<string, { row: ClaimedTaskRow; start: TaskStartRow | undefined }>();
  readonly signals: DispatcherSignals = {
    holdNotArmed: new TestSignal(),
    capRetry: new TestSignal<number>(),
  };

  constructor(
    private readonly ledger: SlotLedger,
    private readonly executor: Launcher,
    /** How each queue's tasks start and go back. */
    private readonly strategies: ClaimStrategies,
    private readonly registry: ReadonlyMap<string, TaskDefinition<StandardSchemaV1, unknown>>,
    private readonly options: DispatcherOptions,
    private readonly logger: Logger,
    private readonly onError: (what: string, error: unknown) => void,
  ) {}

  /**
   * Reserves up to `max` free slots for tasks of `queue` that the claim itself will start (see
   * {@link StartedWithClaim}), and as many more as the claim may start ahead; 0 when starts must go through this
   * queue: tasks are already waiting for a slot (they come first), the queue's starts pass a soft cap's gate, or a
   * task has a per-worker limit.
   */
  reserveStarts(queue: string, max: number): number {
    if (!this.mayStartElsewhere() || this.strategies.of(queue).gatesStart) return 0;
    return this.ledger.reserveFree(max, this.startsAhead(queue) ? this.ledger.startAhead() : 0);
  }

  /**
   * Reserves up to `max` free slots (none ahead of them) for tasks a workflow step will start for this worker
   * (eager dispatch); 0 when starts must go through this queue, as for {@link reserveStarts}.
   */
  reserveForStep(max: number): number {
    return this.mayStartElsewhere() ? this.ledger.reserveFree(max, 0) : 0;
  }

  // Tasks may start outside this queue: it is open, nothing waits in it (what waits comes first), and no task has a
  // per-worker limit (counted here, start by start).
  private mayStartElsewhere(): boolean {
    return this.active && this.waiting.length === 0 && !this.workerLimits();
  }

  /**
   * True when a claim of `queue` starts the tasks it takes ahead of the free slots (`startPrefetched`), so that it
   * claims no more than {@link reserveStarts} gave it: only where nothing else meters the starts (a cap counts
   * them, a rate limiter or a group limit times them, a per-worker limit needs this queue).
   */
  startsAhead(queue: string): boolean {
    return this.ledger.startAhead() > 0 && this.strategies.of(queue).kind === 'plain' && !this.workerLimits();
  }

  // A registered task has a per-worker limit: its starts are counted here, one by one. (Read at each claim: the
  // app may register tasks after the worker was made.)
  private workerLimits(): boolean {
    for (const t of this.registry.values()) if (t.policies.maxConcurrentPerWorker !== null) return true;
    return false;
  }

  /** Gives back slots reserved by {@link reserveStarts} when the claim failed. */
  cancelReservation(reserved: number): void {
    this.ledger.unreserve(reserved);
    this.scheduleDispatch();
  }

  /**
   * Takes in freshly claimed tasks: those the claim started are launched at once (also during shutdown: they
   * are RUNNING already), the others wait for a slot.
   */
  add(tasks: ClaimedTaskRow[], started?: StartedWithClaim): void {
    const deferred = this.claimedAgain(tasks, started);
    if (deferred.size > 0) tasks = tasks.filter((t) => !deferred.has(t.id));
    this.ledger.add(tasks);
    if (started) {
      this.ledger.unreserve(started.reserved);
      const launching = started.tasks.filter((t) => !deferred.has(t.id));
      for (const task of launching) this.ledger.setPhase(task.id, 'starting');
      this.executor.launch(launching, started.rows);
      const launched = new Set(launching.map((t) => t.id));
      tasks = tasks.filter((t) => !launched.has(t.id));
    }
    this.waiting.push(...tasks);
    this.dispatch();
    this.armHold();
  }

  /**
   * Tasks this worker claimed although it holds them still. Most often the earlier hold is ending: its outcome (a
   * retry) is written and about to be settled, or a claim not started was reaped; the new claim's entry replaces
   * the old one (whose settling then leaves it alone: its token is not the new claim's, see
   * {@link SlotLedger.releaseFinished}). When the earlier run has not ended (starting or running), the server lost
   * its claim or start (a crash undid a commit that did not wait for the WAL flush, or the reaper wrote the run
   * off) and the task was claimed again: that run is stopped, and everything it writes is fenced out by its token.
   * So that the worker never runs a task twice at once, the new claim waits aside until the earlier run has left
   * (see {@link released}). Returns the ids of the claims put aside.
   */
  private claimedAgain(tasks: ClaimedTaskRow[], started?: StartedWithClaim): Set<string> {
    const deferred = new Set<string>();
    for (const row of tasks) {
      const held = this.ledger.get(row.id);
      if (!held) continue;
      if (held.phase === 'claimed') {
        this.waiting = this.waiting.filter((t) => t.id !== row.id);
        this.notBefore.delete(row.id);
      } else if (held.phase === 'starting' || held.phase === 'running') {
        this.logger.warn(
          { taskId: row.id, phase: held.phase },
          "claimed a task whose run here has not ended: the server lost that run's claim or start; it is stopped",
        );
        const start = started?.tasks.includes(row) ? started.rows.find((r) => r.id === row.id) : undefined;
        this.successors.set(row.id, { row, start });
        this.executor.stop(row.id, 'lost');
        deferred.add(row.id);
      }
    }
    return deferred;
  }

  /** Tasks left the worker: a rate limiter's deferral of them is forgotten, and a soft cap may have room again. */
  released(ids: string[]): void {
    for (const id of ids) {
      this.notBefore.delete(id);
      // A claim put aside while this task's earlier run was ending (see claimedAgain) takes its place now.
      const next = this.successors.get(id);
      if (!next) continue;
      this.successors.delete(id);
      this.add(
        [next.row],
        next.start === undefined ? undefined : { tasks: [next.row], rows: [next.start], reserved: 0 },
      );
    }
    this.capRoomMayHaveOpened();
  }

  /**
   * A task finished (here: its outcome was written, or it left the worker; elsewhere: its `task_done` was heard), so
   * a soft cap may have room again: the starts it deferred try again now, and their next wait starts from 1 ms.
   */
  capRoomMayHaveOpened(): void {
    this.capRetryMs = 0;
    if (this.capBlocked.size === 0) return;
    this.unblockCapped();
    this.scheduleDispatch();
  }

  /**
   * Dispatches once the current callback and its promise chains are done: runs that end together (their
   * handlers resolve in the same pass) start their successors in one statement, and before the event loop turns
   * to other I/O (a start delayed behind other results costs every slot its wait).
   */
  scheduleDispatch(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    process.nextTick(() => {
      this.scheduled = false;
      this.dispatch();
    });
  }

  /**
   * Of `ids` reported lost by a heartbeat of `role`, those still in the beaten phase (a beat can race a legitimate
   * start or finish). Lost tasks that had not started are forgotten here; running ones are left to the caller.
   */
  takeLost(role: HeartbeatRole, ids: string[]): string[] {
    const phases: Phase[] = role === 'claimer' ? ['claimed'] : ['running'];
    const lost = ids.filter((id) => phases.includes(this.ledger.get(id)?.phase ?? 'finishing'));
    const lostSet = new Set(lost);
    const notStarted = this.waiting.filter((t) => lostSet.has(t.id)).map((t) => t.id);
    this.waiting = this.waiting.filter((t) => !lostSet.has(t.id));
    if (notStarted.length > 0) this.ledger.release(notStarted);
    return lost;
  }

  /** Task names worth claiming: registered, and below their per-worker limit counting what is held. */
  claimableTaskNames(): string[] {
    const held = this.ledger.countByName(['claimed', 'starting', 'running']);
    return [...this.registry.values()]
      .filter(
        (t) =>
          t.policies.maxConcurrentPerWorker === null ||
          (held.get(t.name) ?? 0) < t.policies.maxConcurrentPerWorker,
      )
      .map((t) => t.name);
  }

  /** Starts nothing more (shutdown begins); held tasks stay as they are. */
  pause(): void {
    this.active = false;
    this.unblockCapped();
    if (this.holdTimer) clearTimeout(this.holdTimer);
    this.holdTimer = null;
  }

  /**
   * Hands back to PENDING the claimed tasks that have waited `holdMs` for a slot (not those waiting for a rate
   * limiter or a soft cap), so that another worker can run them; until a run ends here, the worker claims only for
   * free slots.
   */
  private async handBackStale(): Promise<void> {
    if (!this.active || this.options.holdMs <= 0) return;
    const cutoff = Date.now() - this.options.holdMs;
    const stale = this.waiting.filter(
      (t) => this.mayHandBack(t) && (this.ledger.get(t.id)?.since ?? Infinity) <= cutoff,
    );
    if (stale.length === 0) return;
    const staleIds = new Set(stale.map((t) => t.id));
    this.waiting = this.waiting.filter((t) => !staleIds.has(t.id));
    this.ledger.holdBack();
    await this.handBack(stale, `no slot freed for them within ${this.options.holdMs} ms`);
  }

  // A task waiting for a rate limiter or a soft cap stays: every worker would wait for it too.
  private mayHandBack(task: ClaimedTaskRow): boolean {
    return !this.notBefore.has(task.id) && !this.strategies.of(task.queue_name).gatesStart;
  }

  // Checks for tasks waiting past holdMs once the oldest of those that may go back would be. (Timed on all of
  // them, a task a limiter or a cap holds past holdMs would set the check for 1 ms from now, again and again.)
  private armHold(): void {
    if (this.holdTimer || !this.active || this.options.holdMs <= 0) return;
    let oldest = Infinity;
    for (const task of this.waiting) {
      if (this.mayHandBack(task)) oldest = Math.min(oldest, this.ledger.get(task.id)?.since ?? Date.now());
    }
    if (oldest === Infinity) {
      if (this.waiting.length > 0) this.signals.holdNotArmed.fire();
      return;
    }
    this.holdTimer = setTimeout(
      () => {
        this.holdTimer = null;
        void this.handBackStale().finally(() => this.armHold());
      },
      Math.max(1, oldest + this.options.holdMs - Date.now()),
    );
    this.holdTimer.unref?.();
  }

  /** Stops starting tasks and hands the waiting ones back to PENDING (no attempt). */
  async stop(): Promise<void> {
    this.pause();
    await Promise.allSettled([...this.starts]);
    const waiting = this.waiting;
    this.waiting = [];
    if (waiting.length > 0) await this.handBack(waiting, 'the worker is stopping');
  }

  // CLAIMED → PENDING (no attempt) for tasks taken out of `waiting`, then forgets them; if the statement fails,
  // they stay CLAIMED in the table until the reaper requeues them (this worker no longer beats for them).
  private async handBack(tasks: ClaimedTaskRow[], why: string): Promise<void> {
    try {
      for (const [strategy, group] of this.byStrategy(tasks)) await strategy.giveBack(group);
      this.logger.info({ count: tasks.length, why }, 'handed claimed tasks back to PENDING');
    } catch (error) {
      this.onError('handing claimed tasks back failed; the reaper will requeue them', error);
    }
    this.ledger.release(tasks.map((t) => t.id));
  }

  /**
   * Starts waiting tasks while handler slots are free and per-task limits allow, one statement per batch and one
   * batch at a time: the slots that free up while a start is in flight are filled by the next start, together.
   */
  private dispatch(): void {
    if (!this.active || this.starts.size > 0) return;
    const free = this.ledger.freeSlots();
    if (free <= 0 || this.waiting.length === 0) return;
    const active = this.ledger.countByName(['starting', 'running']);
    const batch: ClaimedTaskRow[] = [];
    const rest: ClaimedTaskRow[] = [];
    const now = Date.now();
    for (const task of this.waiting) {
      if ((this.notBefore.get(task.id) ?? 0) > now || this.capBlocked.has(task.queue_name)) {
        rest.push(task);
        continue;
      }
      const limit = this.registry.get(task.task_name)?.policies.maxConcurrentPerWorker ?? null;
      const n = active.get(task.task_name) ?? 0;
      if (batch.length >= free || (limit !== null && n >= limit)) {
        rest.push(task);
        continue;
      }
      active.set(task.task_name, n + 1);
      batch.push(task);
    }
    if (batch.length === 0) return;
    this.waiting = rest;
    for (const task of batch) this.ledger.setPhase(task.id, 'starting');
    this.ledger.reserve(batch.length);
    const start: Promise<void> = this.startBatch(batch)
      .catch((error: unknown) => {
        // The start statement failed: these tasks stay CLAIMED until the reaper hands them back to PENDING.
        this.onError('starting claimed tasks failed', error);
        this.ledger.release(batch.map((t) => t.id));
      })
      .finally(() => {
        this.ledger.unreserve(batch.length);
        this.starts.delete(start);
        this.scheduleDispatch();
      });
    this.starts.add(start);
  }

  // Each strategy starts its tasks in one statement (or one per set of rate limiters); those a soft cap or a rate
  // limiter had no room for wait, unoffered, until it may have.
  private async startBatch(batch: ClaimedTaskRow[]): Promise<void> {
    for (const [strategy, group] of this.byStrategy(batch)) {
      for (const start of await strategy.startPrefetched(group)) {
        this.executor.launch(start.started, start.rows);
        if (start.deferred.length > 0) this.defer(start);
      }
    }
  }

  private defer({ started, deferred, waitsFor, retryAt }: PrefetchedStart): void {
    for (const task of deferred) this.ledger.setPhase(task.id, 'claimed');
    this.waiting.unshift(...deferred);
    if (waitsFor === 'room') {
      if (started.length > 0) this.capRetryMs = 0;
      for (const queue of new Set(deferred.map((t) => t.queue_name))) this.waitForCapRoom(queue);
    } else {
      const at = retryAt?.getTime() ?? Date.now() + this.options.retryMs;
      for (const task of deferred) this.notBefore.set(task.id, at);
      const timer = setTimeout(() => this.scheduleDispatch(), Math.max(1, at - Date.now()));
      timer.unref?.();
    }
    // What waits for room or a window is not timed for the hold (see mayHandBack).
    this.armHold();
  }

  // Tasks grouped by their queue's strategy, in the order of their first task.
  private byStrategy(tasks: ClaimedTaskRow[]): Map<ClaimStrategy, ClaimedTaskRow[]> {
    const groups = new Map<ClaimStrategy, ClaimedTaskRow[]>();
    for (const task of tasks) {
      const strategy = this.strategies.of(task.queue_name);
      const group = groups.get(strategy);
      if (group) group.push(task);
      else groups.set(strategy, [task]);
    }
    return groups;
  }

  // The cap had no room for every start: those it gates wait for a sign that room opened, or for a retry that backs
  // off while none comes (a start tried again at once after each deferral is a cap-lock transaction per round trip,
  // for as long as a long run holds the cap).
  private waitForCapRoom(queue: string): void {
    if (!this.active) return;
    this.capBlocked.add(queue);
    this.capRetryMs = Math.min(this.options.retryMs, Math.max(1, this.capRetryMs * 2));
    if (this.capRetryTimer) clearTimeout(this.capRetryTimer);
    this.capRetryTimer = setTimeout(() => {
      this.unblockCapped();
      this.scheduleDispatch();
    }, this.capRetryMs);
    this.capRetryTimer.unref?.();
    this.signals.capRetry.fire(this.capRetryMs);
  }

  private unblockCapped(): void {
    this.capBlocked.clear();
    if (this.capRetryTimer) clearTimeout(this.capRetryTimer);
    this.capRetryTimer = null;
  }
}
