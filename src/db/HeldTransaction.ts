/**
 * A transaction held open on one pooled connection while code outside this folder runs in it (a handler's
 * transactional finish), with the three ways it can end: commit, rollback, or an interruption from outside while
 * the code may be in the middle of a statement.
 *
 *   begin ──► open ──commit()──► committing ──► done
 *               │ ──rollback()──────────────► done
 *               └ ──interrupt()─────────────► done (statement cancelled, connection closed: the server rolls back)
 */
import pg from 'pg';
import { statement } from './sql.js';
import type { Database } from './Database.js';

/** The client a held transaction runs on: a `pg` pool client inside `BEGIN`. */
export type TransactionClient = pg.PoolClient;

/** Cancels the statement a backend is running, if any (`pg_cancel_backend`); true when a signal was sent. */
export const BackendCancel = statement<{ pid: number }, { cancelled: boolean }>(
  'BackendCancel',
  `SELECT pg_cancel_backend($1) AS cancelled`,
  ({ pid }) => [pid],
);

/**
 * A pool for held transactions, on the same server and database as `db`, of at most `max` connections, kept apart
 * from `db`'s pool so that long transactions cannot starve the statements that keep claims alive (heartbeats,
 * finishes). Idle connections close after 10 s.
 */
export function createTransactionPool(db: Database, max: number): pg.Pool {
  // Without the pool's statement and lock timeouts: the handler's own statements run in these transactions.
  const pool = new pg.Pool({ ...db.untimedConnectionConfig, max, idleTimeoutMillis: 10_000 });
  // An idle client losing its connection must not crash the process; the next checkout reconnects.
  pool.on('error', () => undefined);
  return pool;
}

type State = 'open' | 'committing' | 'done';

/** One transaction held open; see the module comment. */
export class HeldTransaction {
  private state: State = 'open';
  /** Set when the connection failed or was closed on purpose: it must not go back to the pool. */
  private broken: Error | undefined;
  private readonly onError = (error: Error): void => {
    this.broken ??= error;
  };

  private constructor(readonly client: TransactionClient) {
    client.on('error', this.onError);
  }

  /** Checks out a connection of `pool` and sends `BEGIN` on it. */
  static async begin(pool: pg.Pool): Promise<HeldTransaction> {
    const held = new HeldTransaction(await pool.connect());
    try {
      await held.client.query('BEGIN');
    } catch (error) {
      held.broken ??= error instanceof Error ? error : new Error(String(error));
      held.release();
      throw error;
    }
    return held;
  }

  /** True until the transaction is committed, rolled back or interrupted. */
  get open(): boolean {
    return this.state === 'open';
  }

  /** True while `COMMIT` is under way. */
  get committing(): boolean {
    return this.state === 'committing';
  }

  /**
   * Commits and gives the connection back. Rejects if the commit failed; after a lost connection the outcome is
   * unknown to this side (fenced writes settle it).
   */
  async commit(): Promise<void> {
    if (this.state !== 'open') throw new Error(`cannot commit a transaction that is ${this.state}`);
    this.state = 'committing';
    try {
      await this.client.query('COMMIT');
    } catch (error) {
      this.broken ??= error instanceof Error ? error : new Error(String(error));
      throw error;
    } finally {
      this.state = 'done';
      this.release();
    }
  }

  /** Rolls back and gives the connection back. Never throws; a no-op once the transaction ended. */
  async rollback(): Promise<void> {
    if (this.state !== 'open') return;
    this.state = 'done';
    if (!this.broken) {
      await this.client.query('ROLLBACK').catch((error: unknown) => {
        this.broken ??= error instanceof Error ? error : new Error(String(error));
      });
    }
    this.release();
  }

  /**
   * Ends the transaction from outside, at once, while its user may be waiting on a statement: the statement is
   * cancelled through `side` (so it lets go of its locks now, not when it would have ended) and the connection is
   * closed, which makes the server roll back. Every later query on the client rejects. A no-op once a commit is
   * under way or the transaction ended: a commit already sent is left to land or fail on its own.
   */
  interrupt(side: Database, reason: Error): void {
    if (this.state !== 'open') return;
    this.state = 'done';
    const pid = (this.client as unknown as { processID: number | null }).processID;
    if (typeof pid === 'number') void side.run(BackendCancel, { pid }).catch(() => undefined);
    this.broken ??= reason;
    this.release();
  }

  private release(): void {
    this.client.off('error', this.onError);
    // A broken connection is closed, not pooled; closing also ends whatever the server still holds for it.
    this.client.release(this.broken ?? undefined);
    // A client released with an error is ended; errors it still emits while closing go nowhere.
    if (this.broken) this.client.on('error', () => undefined);
  }
}
