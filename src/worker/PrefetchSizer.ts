/**
 * How many tasks a worker with `prefetch: 'auto'` holds claimed beyond its running ones: those it expects to start
 * within `windowMs` at the rate its runs have been ending lately. A worker of many short tasks claims ahead in
 * large batches; a worker of long tasks (or an idle one) claims ahead nothing, so no task waits behind it while
 * another worker could run it.
 *
 * The rate is an exponentially decaying count of ended runs: each run adds 1, and the count decays with time
 * constant `tauMs`, so in a steady state it is the rate times `tauMs`. Runs that begin after an idle spell are
 * counted over the time since they began (at least `minElapsedMs`), as the decaying count of a steady rate would
 * be then: a burst is sized from its own rate within a tenth of a second, not after several `tauMs`.
 */
export class PrefetchSizer {
  private count = 0;
  private at = performance.now();
  /** When the runs counted began, after an idle spell. */
  private since = this.at;

  constructor(
    /** How far ahead to claim, in time. */
    private readonly windowMs: number,
    /** The most it may hold ahead. */
    private readonly max: number,
    private readonly tauMs = 1_000,
    private readonly minElapsedMs = 100,
  ) {}

  /** Runs ended. */
  ran(n = 1): void {
    this.decay();
    // Less than one run left in the count: the runs before were an idle spell ago.
    if (this.count < 1) this.since = this.at;
    this.count += n;
  }

  /** Tasks to hold claimed ahead now. */
  size(): number {
    this.decay();
    const elapsed = Math.max(this.at - this.since, this.minElapsedMs);
    // What the count of a steady rate of one run per ms would have decayed to over `elapsed`.
    const weight = this.tauMs * (1 - Math.exp(-elapsed / this.tauMs));
    return Math.min(this.max, Math.floor((this.count / weight) * this.windowMs));
  }

  private decay(): void {
    const now = performance.now();
    this.count *= Math.exp(-(now - this.at) / this.tauMs);
    this.at = now;
  }
}
