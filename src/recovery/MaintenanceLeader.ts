/**
 * Maintenance for the cluster, run by one worker at a time: campaigns for the `maintenance` leadership
 * (Elector) and, while elected, runs the maintenance services every `checkIntervalMs` (Maintainer). Losing the
 * lease stops the passes; regaining it resumes them.
 */
import { EventEmitter } from 'node:events';
import type { Logger } from 'pino';
import type { Database } from '../db/Database.js';
import { Elector } from './Elector.js';
import { Maintainer } from './Maintainer.js';
import type { MaintenanceService } from './Maintainer.js';

/** Events of a {@link MaintenanceLeader}. */
export interface MaintenanceLeaderEvents {
  'leader:elected': [];
  'leader:lost': [];
  /** One service finished a pass. */
  'maintenance:ran': [service: string, result: unknown];
}

/** Settings of a {@link MaintenanceLeader}. */
export interface MaintenanceLeaderOptions {
  /** This candidate's id (the worker id). */
  candidateId: string;
  /** Time between passes; also the leader lease (renewed every third of it). */
  checkIntervalMs: number;
}

/**
 * A service of the leader with a timer of its own (the scheduler, the vacuum check), started on election and stopped
 * on loss.
 */
export interface LeaderLoop {
  start(): void;
  stop(): Promise<void> | void;
}

/** Campaigns for the maintenance leadership and runs the services while it holds it. */
export class MaintenanceLeader extends EventEmitter<MaintenanceLeaderEvents> {
  private readonly elector: Elector;
  private readonly maintainer: Maintainer;

  constructor(
    db: Database,
    options: MaintenanceLeaderOptions,
    services: MaintenanceService[],
    logger: Logger,
    private readonly loops: readonly LeaderLoop[] = [],
  ) {
    super();
    this.maintainer = new Maintainer(services, { checkIntervalMs: options.checkIntervalMs }, logger);
    this.maintainer.on('maintenance:ran', (service, result) => this.emit('maintenance:ran', service, result));
    this.elector = new Elector(
      db,
      { name: 'maintenance', candidateId: options.candidateId, ttlMs: options.checkIntervalMs },
      logger,
    );
    this.elector.on('leader:elected', () => {
      this.maintainer.start();
      for (const loop of this.loops) loop.start();
      this.emit('leader:elected');
    });
    this.elector.on('leader:lost', () => {
      void this.maintainer.stop();
      for (const loop of this.loops) void loop.stop();
      this.emit('leader:lost');
    });
  }

  /** True while this candidate leads (as of its last election attempt). */
  get isLeader(): boolean {
    return this.elector.isLeader;
  }

  /** Starts campaigning. */
  start(): void {
    this.elector.start();
  }

  /** One pass of every service now, leader or not (tests, operators). */
  runOnce(): Promise<void> {
    return this.maintainer.runOnce();
  }

  /** Resigns (so another candidate takes over at once) and waits for a pass under way. Idempotent. */
  async stop(): Promise<void> {
    await this.elector.stop();
    await this.maintainer.stop();
    await Promise.all(this.loops.map((loop) => loop.stop()));
  }
}
