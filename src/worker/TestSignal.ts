/**
 * A point in the worker's code that a test can wait for, above all one where the code decided not to act (a claim
 * pass that found no room, a registration it did not make): the test awaits the signal instead of sleeping and
 * counting rows to show that nothing happened. A no-op until a test calls {@link TestSignal.enable}; from then on
 * each {@link TestSignal.fire} is kept until a {@link TestSignal.wait} takes it, in order. River's
 * `rivershared/testsignal` is the pattern.
 */
export class TestSignal<T = void> {
  /** Fired values not yet waited for; null while the signal is off. */
  private fired: T[] | null = null;
  private readonly waiters: ((value: T) => void)[] = [];

  /** Turns the signal on (tests only). Values fired before are not kept. */
  enable(): void {
    this.fired ??= [];
  }

  /** Marks the point: hands `value` to the oldest waiter, or keeps it for the next. Nothing while off. */
  fire(value: T): void {
    if (this.fired === null) return;
    const waiter = this.waiters.shift();
    if (waiter) waiter(value);
    else this.fired.push(value);
  }

  /** The next value fired (the oldest kept one first); rejects after `timeoutMs`. */
  wait(timeoutMs = 5_000): Promise<T> {
    if (this.fired === null) return Promise.reject(new Error('TestSignal.wait: the signal is not enabled'));
    if (this.fired.length > 0) return Promise.resolve(this.fired.shift() as T);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        const at = this.waiters.indexOf(take);
        if (at >= 0) this.waiters.splice(at, 1);
        reject(new Error(`TestSignal.wait: nothing fired within ${timeoutMs} ms`));
      }, timeoutMs);
      const take = (value: T): void => {
        clearTimeout(timer);
        resolve(value);
      };
      this.waiters.push(take);
    });
  }

  /** Forgets the values fired and not yet waited for. */
  clear(): void {
    if (this.fired !== null) this.fired.length = 0;
  }
}
