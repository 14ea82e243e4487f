/**
 * Leader election through a lease row in `horsies_leaders`: one worker at a time runs maintenance. The leader
 * renews its lease every `ttlMs / 3`; when it stops renewing (crash, partition), any candidate takes the row once
 * the lease lapses. No session state, so it works behind PgBouncer in transaction mode.
 */
import { EventEmitter } from 'node:events';
import type { Logger } from 'pino';
import type { Database } from '../db/Database.js';
import { LeaderAttemptElect, LeaderResign } from '../db/liveness.js';

/** Events of an {@link Elector}. */
export interface ElectorEvents {
  'leader:elected': [];
  'leader:lost': [];
}

/** Settings of an {@link Elector}. */
export interface ElectorOptions {
  /** The role elected for, e.g. `maintenance`. */
  name: string;
  /** This candidate's id (the worker id). */
  candidateId: string;
  /** Lease length; renewed every third of it. */
  ttlMs: number;
}

/** Campaigns for one leader role. */
export class Elector extends EventEmitter<ElectorEvents> {
  private timer: NodeJS.Timeout | null = null;
  private leader = false;
  private pass: Promise<boolean> | null = null;

  constructor(
    private readonly db: Database,
    private readonly options: ElectorOptions,
    private readonly logger: Logger,
  ) {
    super();
    if (!(options.ttlMs >= 30)) throw new RangeError(`ttlMs must be at least 30, got ${options.ttlMs}`);
  }

  /** True while this candidate holds the lease (as of its last attempt). */
  get isLeader(): boolean {
    return this.leader;
  }

  /** One election attempt (or renewal). Resolves to whether this candidate leads now. */
  runOnce(): Promise<boolean> {
    this.pass ??= this.attempt().finally(() => {
      this.pass = null;
    });
    return this.pass;
  }

  /** Campaigns now and every `ttlMs / 3`. */
  start(): void {
    if (this.timer) return;
    void this.runOnce();
    this.timer = setInterval(() => void this.runOnce(), Math.max(10, Math.floor(this.options.ttlMs / 3)));
    this.timer.unref();
  }

  /** Stops campaigning and resigns the lease if held, so another candidate takes over at once. Idempotent. */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.pass;
    if (!this.leader) return;
    this.setLeader(false);
    await this.db
      .run(LeaderResign, { name: this.options.name, leaderId: this.options.candidateId })
      .catch((error: unknown) =>
        this.logger.warn({ err: error }, 'could not resign leadership; it will lapse'),
      );
  }

  private async attempt(): Promise<boolean> {
    try {
      const rows = await this.db.run(LeaderAttemptElect, {
        name: this.options.name,
        candidateId: this.options.candidateId,
        ttlMs: this.options.ttlMs,
      });
      this.setLeader(rows.length > 0);
    } catch (error) {
      // Without a renewal the lease may lapse and someone else may lead: stop acting as leader.
      this.logger.warn({ err: error }, 'leader election failed');
      this.setLeader(false);
    }
    return this.leader;
  }

  private setLeader(leader: boolean): void {
    if (leader === this.leader) return;
    this.leader = leader;
    this.logger.info({ role: this.options.name }, leader ? 'elected leader' : 'no longer leader');
    this.emit(leader ? 'leader:elected' : 'leader:lost');
  }
}
