/**
 * The worker child of `horsies dev`: started with `fork()` (the same entry point and loader flags as the parent),
 * restarted on request, stopped gracefully. The child reports over IPC what it imports, when its worker runs, and,
 * once stopped, what its drain wrote.
 *
 *     start() ──> running ──restart()──> stopping ──> running (a new child)
 *                    │                                   │
 *                  stop() ─────────────> stopping ──> stopped
 *
 * A change during a restart causes one more; a child that exits on its own (its module failed to load, say) is
 * reported through `onExit` and started again by the next `restart()`.
 */
import { fork } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';

/** What the child reports once its worker runs. */
export interface ReadyMessage {
  type: 'ready';
  schema: string;
  version: number;
  tasks: string[];
  queues: string[];
  /** Port of the child's dashboard on 127.0.0.1, null when it serves none. */
  dashboardPort: number | null;
}

/** Files the child imported (absolute paths), sent as they load. */
export interface ImportsMessage {
  type: 'imports';
  files: string[];
}

/** What the child's worker did between the stop request and its exit. */
export interface StoppedMessage {
  type: 'stopped';
  /** Outcomes written while stopping: the tasks that were running (or claimed) at the stop request. */
  written: number;
}

/** The messages a worker child sends. */
export type ChildMessage = ReadyMessage | ImportsMessage | StoppedMessage;

/** How to run the child. */
export interface SupervisorOptions {
  /** Arguments of the entry point (`dev-worker <module> ...`). */
  args: string[];
  /** Its environment. */
  env: NodeJS.ProcessEnv;
  /** How long a stopping child gets before it is killed. Default 35,000 ms (its drain timeout is 30 s). */
  killAfterMs?: number;
}

/** Runs the worker child, restarts it on request, and stops it. */
export class Supervisor {
  /** A child starts (the first, or after a restart). */
  onStart: () => void = () => undefined;
  onMessage: (message: ChildMessage) => void = () => undefined;
  /** A child exited without being asked to (its module failed to load, or it crashed). */
  onExit: (how: string) => void = () => undefined;
  private child: ChildProcess | null = null;
  private exited: Promise<void> = Promise.resolve();
  private stopped = false;
  private restarting: Promise<void> | null = null;
  private again = false;

  constructor(private readonly options: SupervisorOptions) {}

  /** True while a child runs. */
  get running(): boolean {
    return this.child !== null;
  }

  start(): void {
    this.onStart();
    // The same entry point and loader flags as this process (tsx when run from source).
    const child = fork(process.argv[1] as string, this.options.args, {
      env: this.options.env,
      execArgv: process.execArgv,
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    this.child = child;
    child.on('message', (message: ChildMessage) => {
      if (typeof message === 'object' && message !== null && 'type' in message) this.onMessage(message);
    });
    this.exited = new Promise((resolvePromise) => {
      child.once('exit', (code, signal) => {
        if (this.child === child) this.child = null;
        if (!this.stopped && !this.restarting) this.onExit(signal ?? `code ${code}`);
        resolvePromise();
      });
    });
  }

  /** Stops the child (gracefully) and starts a new one; changes during a restart cause one more. */
  restart(): void {
    if (this.stopped) return;
    if (this.restarting) {
      this.again = true;
      return;
    }
    this.restarting = (async () => {
      do {
        this.again = false;
        await this.stopChild();
        if (this.stopped) return;
        this.start();
      } while (this.again);
    })().finally(() => {
      this.restarting = null;
    });
  }

  /** Stops the child for good: resolves once it has exited. Idempotent. */
  async stop(): Promise<void> {
    this.stopped = true;
    await this.restarting;
    await this.stopChild();
  }

  /** Kills the child at once (a second Ctrl-C). */
  kill(): void {
    this.child?.kill('SIGKILL');
  }

  private async stopChild(): Promise<void> {
    const child = this.child;
    if (child && child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), this.options.killAfterMs ?? 35_000);
      await this.exited;
      clearTimeout(timer);
    }
  }
}
