/**
 * The one account of a worker's slots: every task it holds and the phase each is in, the handler slots, the slots
 * reserved for starts in flight, and how many tasks it may hold ahead of its free slots. Every other part asks it;
 * none keeps a count of its own.
 *
 *   claimed ──slot free──► starting ──start written──► running ──run ended──► finishing ──outcome written──► (gone)
 *
 * - Held tasks: the producer adds what it claims (or what a send handed over), the executor moves each through its
 *   phases, and a written outcome (or a task lost, expired, handed back) releases it.
 * - Slots: `concurrency` handlers run at once. A start in flight holds its slots as a reservation until its rows come
 *   back. With `startPrefetched`, tasks started ahead wait RUNNING for a handler slot ({@link takeSlot}); one that
 *   waits `prefetchHoldMs` is reported (`heldTooLong`) and the worker claims nothing ahead again until a run ends.
 * - Prefetch: how many tasks the worker may hold beyond its running ones: `prefetch`, or with `'auto'` as many as the
 *   rate of its ended runs says it will start within `prefetchWindowMs` (PrefetchSizer).
 *
 * It tells the parts that wait on it through its events: `freed` (a run ended: a slot is free), `released` (tasks left
 * the worker, so room may have opened under a cap too) and `heldTooLong`.
 */
import { EventEmitter } from 'node:events';
import type { HeartbeatRole } from '../db/liveness.js';
import type { ClaimedTaskRow, OwnedTask } from '../db/tasks.js';
import { HandlerSlots } from './HandlerSlots.js';
import { PrefetchSizer } from './PrefetchSizer.js';

/** Where a held task is, locally. */
export type Phase = 'claimed' | 'starting' | 'running' | 'finishing';

/** Settings of a {@link SlotLedger} (the worker config's). */
export interface LedgerSettings {
  concurrency: number;
  /** Most tasks held at once, claimed or running (`maxClaimPerWorker`). */
  maxClaimPerWorker: number;
  maxClaimBatch: number;
  /** Also how many ended runs may wait for their outcome's write before the claims stop. */
  completionBatchSize: number;
  /** Tasks held ahead; with `prefetchAuto`, the most. */
  prefetch: number;
  prefetchAuto: boolean;
  prefetchWindowMs: number;
  /** Tasks started ahead wait RUNNING for a handler slot. */
  startPrefetched: boolean;
  prefetchHoldMs: number;
}

/** What the ledger tells the parts that wait on it. */
export interface LedgerEvents {
  /** A run ended (`ran`: its handler ran): its slot is free. */
  freed: [];
  /** Tasks left the worker: their slots are free, and room may have opened under a cap. */
  released: [ids: string[]];
  /** Runs started ahead waited `prefetchHoldMs` for a handler slot: they go back to PENDING. */
  heldTooLong: [ids: string[]];
}

interface Held {
  row: ClaimedTaskRow;
  phase: Phase;
  /** When it was claimed (ms, this process's clock). */
  since: number;
}

/** See the module comment. */
export class SlotLedger extends EventEmitter<LedgerEvents> {
  private readonly held = new Map<string, Held>();
  private readonly inPhase: Record<Phase, number> = { claimed: 0, starting: 0, running: 0, finishing: 0 };
  /** Slots reserved for starts in flight (a claim that starts, a start statement, a hand-off registration). */
  private reserved = 0;
  /** Tasks were handed back for want of a slot: claim nothing ahead until a run ends. */
  private heldBack = false;
  private open = true;
  private readonly sizer: PrefetchSizer | null;
  private readonly slots: HandlerSlots | null;

  constructor(private readonly settings: LedgerSettings) {
    super();
    this.sizer = settings.prefetchAuto
      ? new PrefetchSizer(settings.prefetchWindowMs, settings.prefetch)
      : null;
    this.slots = settings.startPrefetched
      ? new HandlerSlots(settings.concurrency, settings.prefetchHoldMs, (ids) => {
          this.heldBack = true;
          this.emit('heldTooLong', ids);
        })
      : null;
  }

  /** Tasks held: claimed, starting, running, or ended with their outcome not yet written. */
  get size(): number {
    return this.held.size;
  }

  /** Tasks held that take a slot: all but those whose outcome is being written. */
  get busy(): number {
    return this.held.size - this.inPhase.finishing;
  }

  /** True after tasks were handed back for want of a slot, until a run ends: the worker claims only for free slots. */
  get holdingBack(): boolean {
    return this.heldBack;
  }

  /** Handler slots free now, less those reserved for starts in flight. */
  freeSlots(): number {
    return this.settings.concurrency - this.inPhase.running - this.reserved;
  }

  /**
   * Tasks the worker may claim now: 0 once closed. Tasks whose outcome is being written take no slot, so the claims
   * go on while their outcomes wait for the write in flight, up to a full batch of them (`completionBatchSize`, or
   * as many as the worker may hold if that is more): a write that lags stops the claims.
   */
  capacity(): number {
    if (!this.open) return 0;
    const most = this.mostHeld();
    const unwritten = Math.max(most, this.settings.completionBatchSize);
    return Math.max(0, Math.min(most - this.busy, most + unwritten - this.held.size));
  }

  /**
   * Free slots needed before a freed slot triggers another claim while work is still running: claiming in batches
   * costs a round trip per batch instead of one per task.
   */
  refillThreshold(): number {
    return Math.max(1, Math.floor(Math.min(this.settings.maxClaimBatch, this.mostHeld()) / 2));
  }

  /** Tasks a claim may start beyond the free slots (they wait RUNNING for a handler slot); 0 without `startPrefetched`. */
  startAhead(): number {
    return this.slots === null ? 0 : Math.max(0, this.mostHeld() - this.settings.concurrency);
  }

  /**
   * Reserves up to `max` of the free slots for a start in flight, and up to `ahead` more beyond them (tasks started
   * ahead). Returns how many.
   */
  reserveFree(max: number, ahead = 0): number {
    const n = Math.max(0, Math.min(max, this.freeSlots() + ahead));
    this.reserved += n;
    return n;
  }

  /** Reserves `n` slots the caller has counted free itself (a start batch no larger than the free slots). */
  reserve(n: number): void {
    this.reserved += n;
  }

  /** Gives back reserved slots (the start came back, or failed). */
  unreserve(n: number): void {
    this.reserved -= n;
  }

  /** Takes in tasks just claimed, in the `claimed` phase. */
  add(rows: ClaimedTaskRow[]): void {
    const now = Date.now();
    for (const row of rows) {
      const before = this.held.get(row.id);
      if (before) this.inPhase[before.phase] -= 1;
      this.held.set(row.id, { row, phase: 'claimed', since: now });
      this.inPhase.claimed += 1;
    }
  }

  /** The held entry of a task, if held. */
  get(
    id: string,
  ): { readonly row: ClaimedTaskRow; readonly phase: Phase; readonly since: number } | undefined {
    return this.held.get(id);
  }

  /** Moves a held task to a phase. */
  setPhase(id: string, phase: Phase): void {
    const held = this.held.get(id);
    if (!held) return;
    this.inPhase[held.phase] -= 1;
    this.inPhase[phase] += 1;
    held.phase = phase;
  }

  /**
   * A run ended: its slot is free while its outcome is written. A run whose handler ran (`ran`; not a started task
   * handed back before it ran) counts toward the prefetch rate and lets the worker claim ahead again.
   */
  ended(id: string, ran: boolean): void {
    if (ran) {
      this.sizer?.ran();
      if (this.held.has(id)) this.heldBack = false;
    }
    this.setPhase(id, 'finishing');
    this.emit('freed');
  }

  /** Claimed tasks were handed back for want of a slot: claim nothing ahead until a run ends. */
  holdBack(): void {
    this.heldBack = true;
  }

  /** Forgets tasks (written, lost, expired, handed back) and frees their slots. */
  release(ids: string[]): void {
    for (const id of ids) this.forget(id);
    this.emit('released', ids);
  }

  /** Forgets one task without telling anyone (its entry is replaced by a new claim). */
  forget(id: string): void {
    const held = this.held.get(id);
    if (!held) return;
    this.inPhase[held.phase] -= 1;
    this.held.delete(id);
  }

  /**
   * Forgets tasks whose outcome was settled (written or lost), unless the worker claimed the task again meanwhile (a
   * retry claimed before its outcome was settled here): that newer claim keeps its entry.
   */
  releaseFinished(finishes: readonly { id: string; token: string | null }[]): void {
    this.release(finishes.filter((f) => this.held.get(f.id)?.row.claim_token === f.token).map((f) => f.id));
  }

  /** Ids of the tasks held. */
  heldIds(): string[] {
    return [...this.held.keys()];
  }

  /** Held tasks by phase group: `claimed` (claimed or starting) and `running` (running or finishing). */
  counts(): { claimed: number; running: number } {
    const claimed = this.inPhase.claimed + this.inPhase.starting;
    return { claimed, running: this.held.size - claimed };
  }

  /** The tasks to beat for, per heartbeat role. */
  owned(role: HeartbeatRole): OwnedTask[] {
    const phases: Phase[] = role === 'claimer' ? ['claimed', 'starting'] : ['running', 'finishing'];
    return [...this.held.values()]
      .filter((h) => phases.includes(h.phase))
      .map((h) => ({ id: h.row.id, token: h.row.claim_token }));
  }

  /** Held tasks per task name, of the given phases. */
  countByName(phases: Phase[]): Map<string, number> {
    const counts = new Map<string, number>();
    for (const { row, phase } of this.held.values()) {
      if (phases.includes(phase)) counts.set(row.task_name, (counts.get(row.task_name) ?? 0) + 1);
    }
    return counts;
  }

  /**
   * A handler slot for the run of task `id` started ahead: null when one was free (the run goes on at once),
   * otherwise a promise that resolves when one is handed over to it. Without `startPrefetched`, always null: the
   * producer starts no more than the free slots.
   */
  takeSlot(id: string): Promise<void> | null {
    return this.slots?.take(id) ?? null;
  }

  /** A run that held a handler slot ended: the slot goes to the oldest waiter, or is free. */
  freeSlot(): void {
    this.slots?.release();
  }

  /** A run waiting for a handler slot will not run; a slot handed to it meanwhile goes on to the next. */
  withdrawSlot(id: string): void {
    this.slots?.withdraw(id);
  }

  /** Runs started ahead waiting for a handler slot, oldest first. */
  waitingForSlot(): string[] {
    return this.slots?.waitingIds() ?? [];
  }

  /** The worker stops: it claims nothing more, and the hold timer stops. */
  close(): void {
    this.open = false;
    this.slots?.close();
  }

  // Tasks the worker may hold (claimed or running). After handing back tasks that found no slot in time, nothing is
  // claimed ahead until a run ends.
  private mostHeld(): number {
    const { concurrency, maxClaimPerWorker } = this.settings;
    if (this.heldBack) return Math.min(concurrency, maxClaimPerWorker);
    return this.sizer ? Math.min(maxClaimPerWorker, concurrency + this.sizer.size()) : maxClaimPerWorker;
  }
}
