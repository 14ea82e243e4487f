/**
 * How many tasks a worker with `prefetch: 'auto'` holds claimed beyond its running ones: those it expects to start
 * within `windowMs` at the rate its runs have been ending lately. A worker of many short tasks claims ahead in
 * large batches; a worker of long tasks (or an idle one) claims ahead nothing, so no task waits behind it while
 * another worker could run it.
 *
 * The rate is an exponentially decaying count of ended runs: each run adds 1, and the count decays with time
 * constant `tauMs`, so in a steady state it is the rate times `tauMs`.
 */
export class PrefetchSizer {
  private count = 0;
  private at = performance.now();

  constructor(
    /** How far ahead to claim, in time. */
    private readonly windowMs: number,
    /** The most it may hold ahead. */
    private readonly max: number,
    private readonly tauMs = 1_000,
  ) {}

  /** Runs ended. */
  ran(n = 1): void {
    this.decay();
    this.count += n;
  }

  /** Tasks to hold claimed ahead now. */
  size(): number {
    this.decay();
    return Math.min(this.max, Math.floor((this.count / this.tauMs) * this.windowMs));
  }

  private decay(): void {
    const now = performance.now();
    this.count *= Math.exp(-(now - this.at) / this.tauMs);
    this.at = now;
  }
}
