/**
 * The producer: the one source of work of a worker. It claims from the worker's queues, queue by queue through each
 * queue's claim strategy, up to what the SlotLedger says the worker may hold; it takes the tasks that sends hand to
 * the worker while it is idle (Handoff); and it starts what it claimed as slots free up (its start queue, the
 * Dispatcher). Where the strategy allows, a claim also starts as many of the tasks it takes as there are free slots
 * (PENDING to RUNNING in one row update). Between passes it sleeps until a notification, a freed slot (when more
 * work may be waiting) or the poll interval, whichever comes first.
 */
import type { StandardSchemaV1 } from '@standard-schema/spec';
import type { Logger } from 'pino';
import type { TaskDefinition } from '../client/TaskDefinition.js';
import type { Database } from '../db/Database.js';
import { channels } from '../db/Listener.js';
import type { Listener } from '../db/Listener.js';
import type { HeartbeatRole } from '../db/liveness.js';
import type { ClaimAndStartRow, ClaimedTaskRow, WorkerIdentity } from '../db/tasks.js';
import type { StepSlots } from '../db/workflows.js';
import type { ClaimStrategies, ClaimStrategy } from './claim/ClaimStrategy.js';
import { Dispatcher } from './Dispatcher.js';
import type { DispatcherSignals, Launcher, StartedWithClaim } from './Dispatcher.js';
import type { WorkerSink } from './events.js';
import { Handoff } from './Handoff.js';
import type { SlotLedger } from './SlotLedger.js';
import { TestSignal } from './TestSignal.js';

/**
 * Most slots lent to one workflow step: a wide fan-out starts this many of its nodes here, and the rest wait PENDING
 * for any worker's claim.
 */
const STEP_SLOTS = 64;

/** Points of the producer a test can wait for (see TestSignal). */
export interface ProducerSignals {
  /** Woken, the loop made no claim pass: the worker had no free slot. */
  noRoom: TestSignal;
  /** Every queue ran dry, and the worker registered no slots for hand-offs: it does not take them. */
  noHandoff: TestSignal;
  /** Room may have opened under the caps (a task_done heard, a task released here, a poll). */
  roomMayHaveOpened: TestSignal;
  /** A claim pass of the loop ended (with its hand-off registration, if it made one): the tasks it claimed. */
  passed: TestSignal<number>;
}

/** Settings of a {@link Producer}. */
export interface ProducerOptions {
  /** In the order to serve them: highest priority first. */
  queues: string[];
  maxClaimBatch: number;
  pollIntervalMs: number;
  leaseMs: number;
  identity: WorkerIdentity;
  /** Take single sends handed to the worker while it is idle (see Handoff). */
  handoff: boolean;
  /** Claimed tasks waiting longer than this for a slot go back to PENDING (`prefetchHoldMs`); 0: never. */
  holdMs: number;
}

/** What a producer works with. */
export interface ProducerParts {
  db: Database;
  ledger: SlotLedger;
  strategies: ClaimStrategies;
  /** Runs what the producer starts. */
  executor: Launcher;
  tasks: ReadonlyMap<string, TaskDefinition<StandardSchemaV1, unknown>>;
  logger: Logger;
}

/** One queue's claim: what it took, what of it the claim started, and how many tasks it asked for. */
interface Claim {
  rows: ClaimedTaskRow[];
  started: StartedWithClaim | undefined;
  /** Fewer rows than this: the queue has nothing more to claim right now (or, under a cap, no more room). */
  asked: number;
}

/** Claims tasks for one worker. */
export class Producer {
  private running = false;
  private loop: Promise<void> | null = null;
  private wakeUp: (() => void) | null = null;
  private woken = false;
  /** More work may be waiting: the last claim was full, or a notification came in. */
  private moreLikely = true;
  /**
   * The last claim pass found every queue dry, and no notification came since: only then are free slots lent to
   * workflow steps (see reserveForStep), which a claim with work waiting would rather have.
   */
  private dry = false;
  private failures = 0;
  private readonly timers = new Set<NodeJS.Timeout>();
  readonly signals: ProducerSignals = {
    noRoom: new TestSignal(),
    noHandoff: new TestSignal(),
    roomMayHaveOpened: new TestSignal(),
    passed: new TestSignal<number>(),
  };

  /** Sends hand tasks to this worker while it is idle (see Handoff): taken back before each claim. */
  private readonly handoff: Handoff | null;
  /** Claimed tasks waiting for a slot, and their starts. */
  private readonly dispatcher: Dispatcher;
  private readonly ledger: SlotLedger;
  /** How each queue is claimed; a capped queue without room is left out of passes until room may have opened. */
  private readonly strategies: ClaimStrategies;

  constructor(
    private readonly options: ProducerOptions,
    parts: ProducerParts,
    private readonly sink: Pick<WorkerSink, 'emit' | 'fail'>,
  ) {
    const { db, ledger, strategies, executor, tasks, logger } = parts;
    this.ledger = ledger;
    this.strategies = strategies;
    const { pollIntervalMs: retryMs, holdMs } = options;
    this.dispatcher = new Dispatcher(
      ledger,
      executor,
      strategies,
      tasks,
      { retryMs, holdMs },
      logger,
      (what, error) => sink.fail(what, error),
    );
    this.handoff = options.handoff
      ? new Handoff(
          db,
          { identity: options.identity, leaseMs: options.leaseMs },
          {
            reserveStarts: (queue, max) => this.dispatcher.reserveStarts(queue, max),
            cancelReservation: (reserved) => this.dispatcher.cancelReservation(reserved),
            onClaimed: (rows, started) => this.claimed(rows, started),
            known: () => ledger.heldIds(),
            refill: () => this.refillIdleSlots(),
          },
        )
      : null;
    // A run ended: its successor starts, and a claim follows if enough slots are free. Tasks left the worker: room
    // may have opened under the caps too.
    ledger.on('freed', () => {
      this.dispatcher.scheduleDispatch();
      this.wake(false);
    });
    ledger.on('released', (ids) => {
      this.dispatcher.released(ids);
      this.capRoomMayHaveOpened();
      this.wake(false);
    });
  }

  /** The start queue's points a test can wait for. */
  get startSignals(): DispatcherSignals {
    return this.dispatcher.signals;
  }

  /** The session lock the worker's LISTEN connection holds for hand-offs (see Handoff), if it takes them. */
  get handoffLock(): string | undefined {
    return this.handoff?.lockKey;
  }

  /** The channel sends hand tasks over on, if the worker takes them. */
  get handoffChannel(): string | null {
    return this.handoff?.channel ?? null;
  }

  /**
   * Follows the worker's LISTEN connection: a notification on a queue channel (or on task_done, heard only when caps
   * are set: room may have opened under a cap) asks for a claim pass; one on the hand-off channel is a task a send
   * handed over; after a reconnect, notifications may have been missed, so claim at once.
   */
  listenTo(listener: Listener, schema: string, logger: Logger): void {
    const cancelChannel = channels.taskCancel(schema);
    const doneChannel = channels.taskDone(schema);
    listener.on('notification', (channel, payload) => {
      if (channel === cancelChannel) return;
      if (channel === this.handoff?.channel) return this.handoff.received(payload);
      if (channel === doneChannel) {
        this.dispatcher.capRoomMayHaveOpened();
        this.capRoomMayHaveOpened();
      }
      this.wake();
    });
    listener.on('reconnect', () => {
      logger.info('LISTEN connection back');
      this.handoff?.reconnected();
      this.capRoomMayHaveOpened();
      this.wake();
    });
    listener.on('error', (error) => logger.warn({ err: error }, 'LISTEN connection lost; reconnecting'));
  }

  /**
   * Of `ids` reported lost by a heartbeat of `role`, those still in the beaten phase; lost tasks that had not
   * started are forgotten, running ones are left to the caller.
   */
  takeLost(role: HeartbeatRole, ids: string[]): string[] {
    return this.dispatcher.takeLost(role, ids);
  }

  // Claimed tasks (and those the claim started) go to the start queue.
  private claimed(rows: ClaimedTaskRow[], started?: StartedWithClaim): void {
    this.sink.emit(
      'task:claimed',
      rows.map((t) => t.id),
    );
    this.dispatcher.add(rows, started);
  }

  /**
   * One claim pass: claims up to min(free capacity, maxClaimBatch) tasks, from the queues in their configured
   * order (a later queue gets what the earlier ones left), and hands them over.
   */
  async runOnce(): Promise<ClaimedTaskRow[]> {
    // A run that ends while the registration is taken back frees a slot this pass counts: its wake is not another
    // pass. A notification meanwhile still is.
    const likely = this.moreLikely;
    this.moreLikely = false;
    await this.handoff?.take();
    const limit = Math.min(this.ledger.capacity(), this.options.maxClaimBatch);
    const taskNames = this.dispatcher.claimableTaskNames();
    if (limit <= 0 || taskNames.length === 0) {
      this.moreLikely ||= likely;
      return [];
    }
    const claimed: ClaimedTaskRow[] = [];
    // Every queue gave less than its claim asked for: none has a task to claim now. (A capped queue without room
    // counts as dry, whether this pass claimed from it or knew it full: its tasks wait for room, not for slots.)
    let dry = true;
    for (const queue of this.options.queues) {
      const strategy = this.strategies.of(queue);
      if (strategy.full()) continue;
      const wanted = limit - claimed.length;
      const claim = strategy.startsInClaim
        ? await this.startingClaim(strategy, queue, taskNames, wanted)
        : {
            rows: await strategy.claim(this.claimParams(queue, taskNames, wanted), 0),
            started: undefined,
            asked: wanted,
          };
      const { rows, started } = claim;
      dry &&= rows.length < claim.asked;
      if (rows.length === 0) continue;
      claimed.push(...rows);
      this.claimed(rows, started);
      if (claimed.length === limit) {
        this.moreLikely = true;
        break;
      }
    }
    this.dry = dry;
    if (dry) await this.offerIdleSlots(taskNames);
    return claimed;
  }

  /**
   * Half the slots registered for hand-offs were taken: renews the registration with the slots freed since, in one
   * statement that replaces it (a claim pass would take it back first, and a send meanwhile would find none).
   */
  refillIdleSlots(): void {
    this.offerIdleSlots(this.dispatcher.claimableTaskNames(), true).catch((error: unknown) =>
      this.sink.fail('claim failed', error),
    );
  }

  // Every queue ran dry with slots free: sends to the queues that nothing meters (a cap counts its claims and
  // starts, a rate limit or a group limit times them) may hand their tasks straight to this worker. With `renew`,
  // only a registration still out is renewed (a claim pass took it back: that pass registers if it finds nothing).
  private async offerIdleSlots(taskNames: string[], renew = false): Promise<void> {
    if (this.handoff === null) return this.signals.noHandoff.fire();
    if (!this.running) return;
    const queues = this.options.queues.filter((q) => this.strategies.of(q).kind === 'plain');
    if (queues.length > 0) await this.handoff.register(queues, taskNames, this.ledger.capacity(), renew);
  }

  /**
   * Lends free slots to a workflow step this worker runs after its outcomes (eager dispatch, see
   * `workflow/step.ts`): the step starts the nodes it enqueues in them, for this worker. Only for the queues that
   * nothing meters, only while nothing waits here for a slot, and only while the queues were dry at the last claim
   * pass: with work waiting, lent slots would keep the claims out of them for the step's round trip (a wide
   * workflow steps all the time), and the step would find a task ahead of its nodes anyway. Null when there is
   * nothing to lend.
   */
  reserveForStep(): StepSlots | null {
    if (!this.running || !this.dry) return null;
    const queues = this.options.queues.filter((q) => this.strategies.of(q).kind === 'plain');
    if (queues.length === 0) return null;
    const slots = this.dispatcher.reserveForStep(STEP_SLOTS);
    if (slots === 0) return null;
    const { identity: worker, leaseMs } = this.options;
    return { slots, queues, taskNames: this.dispatcher.claimableTaskNames(), worker, leaseMs };
  }

  /** A step that was lent `slots` returned: what it started runs now, and the slots it left are free again. */
  stepStarted(slots: StepSlots, rows: ClaimAndStartRow[]): void {
    if (rows.length === 0) this.dispatcher.cancelReservation(slots.slots);
    else this.claimed(rows, startedWithClaim(rows, slots.slots));
    // Slots the step did not take are free for a claim.
    if (rows.length < slots.slots) this.wake(false);
  }

  // A claim that starts up to the slots reserved for it: the rows it wrote RUNNING are launched at once; a failed
  // claim, or one that started nothing, gives the reservation back.
  private async startingClaim(
    strategy: ClaimStrategy,
    queue: string,
    taskNames: string[],
    wanted: number,
  ): Promise<Claim> {
    const reserved = this.dispatcher.reserveStarts(queue, wanted);
    const ahead = this.dispatcher.startsAhead(queue);
    if (reserved === 0 && ahead) {
      // No slot to start into right now (what the worker holds ahead shrank since the pass began): the next freed
      // slot asks again.
      this.moreLikely = true;
      return { rows: [], started: undefined, asked: 0 };
    }
    const limit = ahead ? reserved : wanted;
    let rows: ClaimAndStartRow[];
    try {
      rows = await strategy.claim(this.claimParams(queue, taskNames, limit), reserved);
    } catch (error) {
      this.dispatcher.cancelReservation(reserved);
      throw error;
    }
    // A claim that took all it asked for suggests more work, also when it asked for less than the pass wanted.
    if (rows.length === limit) this.moreLikely = true;
    const running = rows.filter((r) => r.status === 'RUNNING');
    if (running.length === 0) {
      this.dispatcher.cancelReservation(reserved);
      return { rows, started: undefined, asked: limit };
    }
    return { rows, started: startedWithClaim(running, reserved), asked: limit };
  }

  private claimParams(queue: string, taskNames: string[], limit: number) {
    return { queue, taskNames, limit, leaseMs: this.options.leaseMs, worker: this.options.identity };
  }

  /** Starts the loop. */
  start(): void {
    if (this.running) return;
    this.running = true;
    this.loop = this.run();
  }

  /**
   * Asks for a claim pass soon. `hint` says new work was announced (a notification); without it (a slot was
   * freed) the pass happens only if more work is likely and enough slots are free to make a batch.
   */
  wake(hint = true): void {
    // A freed slot is what a renewal of the hand-off registration waited for.
    if (!hint && this.handoff?.slotFreed()) this.refillIdleSlots();
    if (hint) {
      this.moreLikely = true;
      this.dry = false;
    } else if (!this.moreLikely) return;
    else if (!this.idle() && this.ledger.capacity() < this.ledger.refillThreshold()) return;
    this.woken = true;
    this.wakeUp?.();
  }

  /**
   * Asks for a claim pass in `delayMs` (a retry this worker wrote becomes claimable then), if that is sooner
   * than the next poll. Other workers find it at their poll, or by their own retries' timers.
   */
  wakeAfter(delayMs: number): void {
    if (!this.running || delayMs >= this.options.pollIntervalMs) return;
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      this.wake();
    }, delayMs + 5);
    this.timers.add(timer);
  }

  /**
   * Room may have opened under the caps (a task finished or left its claim, here or elsewhere): capped queues
   * whose room ran out are claimed from again at the next pass.
   */
  capRoomMayHaveOpened(): void {
    for (const strategy of this.strategies.all()) strategy.roomMayHaveOpened();
    this.signals.roomMayHaveOpened.fire();
  }

  /**
   * Stops claiming and starting: resolves when the loop has exited and the claimed tasks that had not started are
   * handed back to PENDING (no attempt). Idempotent.
   */
  async stop(): Promise<void> {
    this.ledger.close();
    this.dispatcher.pause();
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
    this.running = false;
    this.woken = true;
    this.wakeUp?.();
    await this.loop;
    // What sends handed over is RUNNING for this worker already: the stop's drain settles it with the rest.
    await this.handoff?.take().catch((error: unknown) => this.sink.fail('claim failed', error));
    await this.dispatcher.stop();
  }

  // The worker holds no task that takes a slot.
  private idle(): boolean {
    return this.ledger.busy === 0;
  }

  private async run(): Promise<void> {
    while (this.running) {
      this.woken = false;
      let full = false;
      if (this.ledger.capacity() <= 0) this.signals.noRoom.fire();
      else {
        try {
          const requested = Math.min(this.ledger.capacity(), this.options.maxClaimBatch);
          const rows = await this.runOnce();
          this.signals.passed.fire(rows.length);
          full = rows.length === requested && requested > 0;
          this.failures = 0;
        } catch (error) {
          this.failures += 1;
          this.sink.fail('claim failed', error);
          await this.sleep(
            Math.min(this.options.pollIntervalMs, 50 * 2 ** Math.min(this.failures, 8)),
            false,
          );
          continue;
        }
      }
      // A full claim suggests more work: claim again at once, but only for a batch worth a statement (slots free
      // up one by one as runs end; a claim per few of them would cost more than it brings).
      if (full && (this.idle() || this.ledger.capacity() >= this.ledger.refillThreshold())) continue;
      if (!this.woken && this.running) {
        await this.sleep(this.options.pollIntervalMs, true);
        // A poll: room may have opened with no sign of it (the lease of a dead worker's claim ran out).
        if (!this.woken) this.capRoomMayHaveOpened();
      }
    }
  }

  private sleep(ms: number, wakeable: boolean): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done(): void {
        clearTimeout(timer);
        resolve();
      }
      this.wakeUp = () => {
        this.wakeUp = null;
        if (wakeable || !this.running) done();
      };
    });
  }
}

/** Tasks written RUNNING where they were claimed or inserted (a claim that starts, a workflow step), with their slots. */
function startedWithClaim(tasks: ClaimAndStartRow[], reserved: number): StartedWithClaim {
  const rows = tasks.map((r) => ({
    id: r.id,
    status: 'RUNNING' as const,
    attempt: r.attempt,
    started_at: r.started_at,
  }));
  return { tasks, rows, reserved };
}
