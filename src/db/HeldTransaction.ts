/**
 * A transaction held open on one pooled connection while code outside this folder runs in it (a handler's
 * transactional finish), with the three ways it can end: commit, rollback, or an interruption from outside while
 * the code may be in the middle of a statement.
 *
 *   begin ──► open ──commitAfter()──► committing ──► done
 *               │ ──rollback()──────────────► done
 *               └ ──interrupt()─────────────► done (statement cancelled, connection closed: the server rolls back)
 *
 * Round trips: the connections of {@link createTransactionPool} are in pg's pipeline mode, where each query is
 * written at once, with a Sync of its own, without waiting for the answers to those before it. `BEGIN` is written
 * at checkout and not waited for, so the first statement of the code follows it and both answers come back
 * together; the last statement (the fenced finish) and the `COMMIT` are written back to back. A transaction whose
 * code makes one statement thus costs two round trips, not four. Neither pair can leave a write outside the
 * transaction or commit it after a refusal:
 * - `BEGIN` is sent only on a connection whose last answer said it was idle, where it cannot fail but with the
 *   connection (and every statement behind it then fails too);
 * - a finish that must refuse the commit raises, which aborts the transaction: the server answers the `COMMIT`
 *   behind it with a rollback, and {@link HeldTransaction.commitAfter} reads which of the two it did.
 * On a pool of the caller's that is not in pipeline mode the same statements go one after the other.
 */
import pg from 'pg';
import { statement } from './sql.js';
import type { Statement } from './sql.js';
import { isStalePlanError } from './Database.js';
import type { Database } from './Database.js';
import { statementTypes } from './typeParsers.js';

/** The client a held transaction runs on: a `pg` pool client inside `BEGIN`. */
export type TransactionClient = pg.PoolClient;

/** Cancels the statement a backend is running, if any (`pg_cancel_backend`); true when a signal was sent. */
export const BackendCancel = statement<{ pid: number }, { cancelled: boolean }>(
  'BackendCancel',
  `SELECT pg_cancel_backend($1) AS cancelled`,
  ({ pid }) => [pid],
);

/**
 * A pool for held transactions, on the same server and database as `db`, of at most `max` connections in pipeline
 * mode, kept apart from `db`'s pool so that long transactions cannot starve the statements that keep claims alive
 * (heartbeats, finishes). Idle connections close after 10 s.
 */
export function createTransactionPool(db: Database, max: number): pg.Pool {
  // Without the pool's statement and lock timeouts: the handler's own statements run in these transactions.
  const pool = new pg.Pool({ ...db.untimedConnectionConfig, max, idleTimeoutMillis: 10_000, pipeline: true });
  // An idle client losing its connection must not crash the process; the next checkout reconnects.
  pool.on('error', () => undefined);
  return pool;
}

type State = 'open' | 'committing' | 'done';

/** What {@link HeldTransaction.commitAfter} did, when it knows. */
export type CommitAfter<R> =
  /** The statement ran and the transaction committed. */
  | { committed: true; rows: R[] }
  /** The statement failed, so the server rolled the transaction back instead of committing it. */
  | { committed: false; error: unknown };

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

  /**
   * Checks out a connection of `pool` and sends `BEGIN` on it; in pipeline mode without waiting for its answer
   * (see the module comment). Rejects when the connection is not idle: `BEGIN` could then fail, or only warn and
   * leave the caller's statements in a transaction that is not this one.
   */
  static async begin(pool: pg.Pool): Promise<HeldTransaction> {
    const held = new HeldTransaction(await pool.connect());
    const status = held.client.getTransactionStatus();
    if (status !== 'I') {
      held.broken = new Error(`the pooled connection is not idle (transaction status ${String(status)})`);
      held.release();
      throw held.broken;
    }
    const begun = held.client.query('BEGIN').then(
      () => undefined,
      (error: unknown) => {
        held.broken ??= error instanceof Error ? error : new Error(String(error));
        throw error;
      },
    );
    if (!held.client.pipeline) {
      await begun.catch((error: unknown) => {
        held.release();
        throw error;
      });
    } else {
      // Its failure (a lost connection) fails every statement behind it; commitAfter reports it.
      begun.catch(() => undefined);
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
   * Runs `stmt`, then commits: in pipeline mode both are written back to back, one round trip for the two. A
   * statement that must veto the commit raises; the transaction is then aborted and the server rolls it back in
   * place of the COMMIT. Gives the connection back. Resolves with the statement's rows once committed, or with its
   * error once rolled back; rejects when the COMMIT failed or the connection was lost on the way (the outcome is
   * then unknown to this side; fenced writes settle it).
   */
  async commitAfter<P, R>(db: Database, stmt: Statement<P, R>, params: P): Promise<CommitAfter<R>> {
    if (this.state !== 'open') throw new Error(`cannot commit a transaction that is ${this.state}`);
    this.state = 'committing';
    const values = stmt.values(params);
    // pg binds values as it writes the statement, and a value it cannot bind fails there, on this side, after
    // which the COMMIT behind would still go out and commit without the statement: only plain values pass.
    if (!values.every(plainValue)) {
      this.state = 'open';
      throw new TypeError(`${stmt.name}: a value is not a string, number, boolean, null or an array of them`);
    }
    // Prepared under its name, as Database.run sends it: parsed and planned once per connection, not once per task.
    const query = { ...db.queryConfig(stmt), values, types: statementTypes };
    try {
      let ran: PromiseSettledResult<pg.QueryResult>;
      let ended: PromiseSettledResult<pg.QueryResult>;
      if (this.client.pipeline) {
        [ran, ended] = await Promise.allSettled([this.client.query(query), this.client.query('COMMIT')]);
      } else {
        [ran] = await Promise.allSettled([this.client.query(query)]);
        [ended] = await Promise.allSettled([this.client.query('COMMIT')]);
      }
      if (ended.status === 'rejected') throw ended.reason;
      // COMMIT in an aborted transaction ends it as ROLLBACK would, and says so in its command tag.
      if (ended.value.command !== 'COMMIT') {
        if (ran.status === 'rejected') {
          // Prepared on this connection before a migration changed what it returns: the next call renames it.
          if (isStalePlanError(ran.reason)) db.renamePrepared();
          return { committed: false, error: await db.explain(ran.reason) };
        }
        throw new Error(`the transaction ended in ${ended.value.command} instead of COMMIT`);
      }
      if (ran.status === 'rejected') {
        throw new Error('the statement before COMMIT failed outside a transaction', { cause: ran.reason });
      }
      return { committed: true, rows: ran.value.rows as R[] };
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

/** A value pg binds without calling anything of the caller's: null, a string, number or boolean, or an array of them. */
function plainValue(value: unknown): boolean {
  if (Array.isArray(value)) return value.every((item) => !Array.isArray(item) && plainValue(item));
  return value === null || ['string', 'number', 'boolean'].includes(typeof value);
}
