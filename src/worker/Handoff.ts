/**
 * Single sends handed to this worker while it is idle (`handoff`: `routines/horsies_send_one.sql` and the table `horsies_idle_slots`). After a claim pass that left
 * its queues empty, the worker reserves its free slots in the dispatcher and registers them, one count for every
 * queue of the worker that nothing meters (no cap, rate limit or group limit); a send that finds the
 * registration inserts its task claimed and started for this worker and notifies it on its own channel with the
 * row a claim would have returned, which the dispatcher launches at once. Once half the slots are taken, the worker
 * renews the registration with the slots freed since, in one statement that replaces it. Before its next claim (and
 * when it stops) the worker takes the registration back, with the ids of every task handed to it: those whose
 * notification it has not had (still on their way, or lost with its LISTEN connection) are read from their rows and
 * launched too, and the slots nobody took are given back. The registration is only valid while the worker's LISTEN
 * connection holds the session lock `lockKey` (see Listener `sessionLock`): a send that finds the lock free treats
 * the worker as gone and removes its registration, so after a reconnect the next take looks for every task handed
 * to it.
 */
import { randomBytes } from 'node:crypto';
import type { Database } from '../db/Database.js';
import { channels } from '../db/Listener.js';
import { IdleRegister, IdleTake, TaskHandedRows } from '../db/handoff.js';
import type { IdleRegisterRow } from '../db/handoff.js';
import type { ClaimAndStartRow, ClaimedTaskRow, WorkerIdentity } from '../db/tasks.js';
import type { StartedWithClaim } from './Dispatcher.js';

/** Settings of a {@link Handoff}. */
export interface HandoffOptions {
  identity: WorkerIdentity;
  leaseMs: number;
}

/** What the hand-off calls back into. */
export interface HandoffHooks {
  /** Reserves up to `max` free slots for tasks of `queue` started for this worker (the dispatcher's). */
  reserveStarts(queue: string, max: number): number;
  /** Gives back reserved slots nobody took. */
  cancelReservation(reserved: number): void;
  /** Tasks handed over, started already, with the slots reserved for them. */
  onClaimed(tasks: ClaimedTaskRow[], started: StartedWithClaim): void;
  /** Ids of the tasks the worker holds. */
  known(): string[];
  /** Half the registered slots are taken: renew the registration with the slots freed since ({@link register}). */
  refill(): void;
}

interface Registration {
  token: number;
  /** Slots reserved and not yet taken by a hand-off. */
  reserved: number;
  /** Slots reserved when it registered. */
  registered: number;
  /** A claim pass was asked for to register anew. */
  refilling: boolean;
  /** Tasks whose notification arrived. */
  received: Set<string>;
}

/** The payload of a hand-off's notification (see `horsies_send_one`). */
interface HandedPayload extends Omit<ClaimAndStartRow, 'enqueued_at' | 'started_at' | 'workflow_id'> {
  enqueued_at: string;
  started_at: string;
  token: number;
}

/** One worker's registration of idle slots, and the tasks sends hand to it. */
export class Handoff {
  /** The session lock the worker's LISTEN connection holds: a random 63-bit key, as a decimal string. */
  readonly lockKey = (randomBytes(8).readBigUInt64BE() >> 1n).toString();
  readonly channel: string;
  private registration: Registration | null = null;
  private turn: Promise<void> = Promise.resolve();
  /** Half the registered slots were taken while none had freed: the next freed slot renews the registration. */
  private renewWanted = false;
  private tokens = 0;
  /** The LISTEN connection came back: look for every task handed to this worker at the next take. */
  private searchAll = false;

  constructor(
    private readonly db: Database,
    private readonly options: HandoffOptions,
    private readonly hooks: HandoffHooks,
  ) {
    this.channel = channels.handoff(db.schema, this.lockKey);
  }

  /**
   * Registers the free slots (up to `free`) the dispatcher can reserve for `queues`, after a claim pass that found
   * every queue of the worker empty. A registration that is out already is renewed: the new one keeps the slots the
   * old one has left, adds those freed since, and replaces it in one statement, so that a send finds one at every
   * moment; the tasks the old one handed over and this worker has not heard of are launched. With `renewOnly`, only
   * a registration that is out is renewed. A failed registration stays counted as out: the next take removes
   * whatever the statement left, and gives the slots back.
   */
  register(queues: string[], taskNames: string[], free: number, renewOnly = false): Promise<void> {
    return this.inTurn(async () => {
      if (!renewOnly || this.registration !== null) await this.registerNow(queues, taskNames, free);
    });
  }

  /**
   * Takes the registration back (before a claim, and when the worker stops): launches what was handed over and not
   * heard of, and gives back the slots nobody took. Rejects when the database does; the registration then stays
   * out, and the next take tries again.
   */
  take(): Promise<void> {
    return this.inTurn(() => this.takeNow());
  }

  // One change of the registration at a time: a refill's renewal runs beside the claim passes.
  private inTurn(change: () => Promise<void>): Promise<void> {
    const done = this.turn.then(change);
    this.turn = done.catch(() => {});
    return done;
  }

  private async registerNow(queues: string[], taskNames: string[], free: number): Promise<void> {
    const [first] = queues;
    if (first === undefined) return this.takeNow();
    // After a LISTEN reconnect a send may have dropped the registration with its list: the take searches.
    if (this.searchAll) await this.takeNow();
    const old = this.registration;
    const added = free > 0 ? this.hooks.reserveStarts(first, free) : 0;
    if (old !== null && added === 0) {
      // No slot freed since (the tasks handed over still run): renewed when one is (see slotFreed).
      this.renewWanted = true;
      return;
    }
    this.renewWanted = false;
    const carried = old?.reserved ?? 0;
    if (carried + added <= 0) return;
    this.tokens += 1;
    const next: Registration = {
      token: this.tokens,
      reserved: carried + added,
      registered: carried + added,
      refilling: false,
      received: new Set(),
    };
    // Before the statement: a hand-off under the new token may be heard before its reply.
    this.registration = next;
    let row: IdleRegisterRow | undefined;
    try {
      [row] = await this.db.run(IdleRegister, {
        queues,
        taskNames,
        free: added,
        lockKey: this.lockKey,
        channel: this.channel,
        token: this.tokens,
        leaseMs: this.options.leaseMs,
        worker: this.options.identity,
        carry: old !== null,
      });
    } catch (error) {
      // Whether the old registration's list is gone is unknown: the next take looks for every task handed over.
      if (old !== null) this.searchAll = true;
      throw error;
    }
    // Handed over under the old token, and not heard of (a notification still on its way is then ignored).
    const missing = (row?.handed ?? []).filter((id) => !old?.received.has(id));
    let launched = 0;
    if (missing.length > 0) {
      let rows: ClaimAndStartRow[];
      try {
        rows = await this.db.run(TaskHandedRows, {
          workerId: this.workerId,
          ids: missing,
          known: this.hooks.known(),
        });
      } catch (error) {
        this.searchAll = true;
        throw error;
      }
      this.launch(rows, next);
      launched = rows.length;
    }
    // The slots carried over are those the old registration had left in the database; any more reserved here are
    // given back (they cannot be taken).
    const excess = carried - launched - (row?.left ?? 0);
    if (old !== null && excess > 0) {
      next.reserved -= excess;
      next.registered -= excess;
      this.hooks.cancelReservation(excess);
    }
  }

  /** A notification on the worker's channel: a task handed over by its send, launched at once. */
  received(payload: string): void {
    const registration = this.registration;
    let handed: HandedPayload;
    try {
      handed = JSON.parse(payload) as HandedPayload;
    } catch {
      return; // not a hand-off's: the take reads what was handed from the rows
    }
    // A notification of an earlier registration: its take read the task from its row.
    if (
      registration === null ||
      handed.token !== registration.token ||
      registration.received.has(handed.id)
    ) {
      return;
    }
    registration.received.add(handed.id);
    const row: ClaimAndStartRow = {
      id: handed.id,
      task_name: handed.task_name,
      queue_name: handed.queue_name,
      priority: handed.priority,
      kwargs: handed.kwargs,
      claim_generation: handed.claim_generation,
      claim_token: handed.claim_token,
      retry_count: handed.retry_count,
      max_retries: handed.max_retries,
      attempt: handed.attempt,
      enqueued_at: new Date(handed.enqueued_at),
      trace_context: handed.trace_context,
      workflow_id: null,
      workflow_node: null,
      workflow_node_id: null,
      status: 'RUNNING',
      started_at: new Date(handed.started_at),
    };
    this.launch([row], registration);
    // Register anew (with the slots freed since) before the sends that follow find none left and go the slow way.
    if (!registration.refilling && registration.reserved * 2 <= registration.registered) {
      registration.refilling = true;
      this.hooks.refill();
    }
  }

  private async takeNow(): Promise<void> {
    const registration = this.registration;
    if (registration === null && !this.searchAll) return;
    const taken = registration === null ? [] : await this.db.run(IdleTake, { workerId: this.workerId });
    this.registration = null;
    const missing = taken.flatMap((r) => r.handed).filter((id) => !registration?.received.has(id));
    const searchAll = this.searchAll;
    let rows: ClaimAndStartRow[] = [];
    try {
      if (searchAll || missing.length > 0) {
        rows = await this.db.run(TaskHandedRows, {
          workerId: this.workerId,
          ids: searchAll ? null : missing,
          known: this.hooks.known(),
        });
      }
      this.searchAll = false;
    } catch (error) {
      // The registration is gone: find what it handed over at the next take.
      this.searchAll = true;
      if (registration !== null) this.hooks.cancelReservation(registration.reserved);
      throw error;
    }
    const left = { reserved: registration?.reserved ?? 0 };
    this.launch(rows, left);
    if (left.reserved > 0) this.hooks.cancelReservation(left.reserved);
  }

  /**
   * A slot freed (a run of this worker ended): true, once, when a renewal of the registration waited for one (see
   * {@link register}); the caller then registers.
   */
  slotFreed(): boolean {
    if (!this.renewWanted || this.registration === null) return false;
    this.renewWanted = false;
    return true;
  }

  /** The LISTEN connection came back: notifications in the gap are lost, and a send may have dropped the registration. */
  reconnected(): void {
    this.searchAll = true;
  }

  private get workerId(): string {
    return this.options.identity.workerId;
  }

  // Launches handed tasks, each in a slot reserved for it while any is left (beyond them, as started ahead).
  private launch(rows: ClaimAndStartRow[], slots: { reserved: number }): void {
    for (const row of rows) {
      const reserved = slots.reserved > 0 ? 1 : 0;
      slots.reserved -= reserved;
      this.hooks.onClaimed([row], {
        tasks: [row],
        rows: [{ id: row.id, status: 'RUNNING', attempt: row.attempt, started_at: row.started_at }],
        reserved,
      });
    }
  }
}
