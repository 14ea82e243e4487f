/**
 * Runs the maintenance services (reaper, expiry, retention) every `checkIntervalMs`. Each service
 * is a class with `runOnce()`, which the loop calls and tests call directly. Every service's statements are safe
 * to run from several workers at once (SKIP LOCKED batches, idempotent deletes).
 */
import { EventEmitter } from 'node:events';
import type { Logger } from 'pino';

/** A maintenance service: one pass of work per call. */
export interface MaintenanceService<R = unknown> {
  readonly name: string;
  /**
   * Default true. False leaves the service out of the pass that `start()` runs (a new leader's first), for work
   * that can wait one interval: that pass is for recovery, and it comes when the workers start, often on a backlog.
   */
  readonly runsOnStart?: boolean;
  runOnce(): Promise<R>;
}

/** Events of a {@link Maintainer}. */
export interface MaintainerEvents {
  /** One service finished a pass. */
  'maintenance:ran': [service: string, result: unknown];
  'maintenance:error': [service: string, error: unknown];
}

/** Settings of a {@link Maintainer}. */
export interface MaintainerOptions {
  /** Time between passes. */
  checkIntervalMs: number;
  /** Run a first pass right after `start()`. Default true. */
  runOnStart?: boolean;
}

/** Runs maintenance services on a timer. */
export class Maintainer extends EventEmitter<MaintainerEvents> {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  /** Bumped by stop(), so a pass under way skips its remaining services. */
  private epoch = 0;

  constructor(
    private readonly services: MaintenanceService[],
    private readonly options: MaintainerOptions,
    private readonly logger: Logger,
  ) {
    super();
  }

  /** Starts the timer (again, after a stop: a worker that regains leadership resumes). */
  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => void this.runOnce(), this.options.checkIntervalMs);
    this.timer.unref();
    if (this.options.runOnStart ?? true) void this.join(true);
  }

  /** One pass of every service, in order. A pass already under way is joined, not doubled. */
  runOnce(): Promise<void> {
    return this.join(false);
  }

  private join(starting: boolean): Promise<void> {
    this.running ??= this.pass(starting).finally(() => {
      this.running = null;
    });
    return this.running;
  }

  /** Stops the timer and waits for a pass under way. Idempotent. */
  async stop(): Promise<void> {
    this.epoch += 1;
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.running;
  }

  private async pass(starting: boolean): Promise<void> {
    const epoch = this.epoch;
    for (const service of this.services) {
      if (this.epoch !== epoch) return;
      if (starting && service.runsOnStart === false) continue;
      try {
        const result = await service.runOnce();
        this.emit('maintenance:ran', service.name, result);
      } catch (error) {
        this.logger.error({ err: error, service: service.name }, 'maintenance pass failed');
        this.emit('maintenance:error', service.name, error);
      }
    }
  }
}
