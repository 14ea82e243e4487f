/** Keeps the CPU busy for `ms` without yielding (and ignores any AbortSignal, as CPU-bound code does). */
export function spinFor(ms: number): { spunMs: number; x: boolean } {
  const until = Date.now() + ms;
  let x = 0;
  while (Date.now() < until) x += Math.sqrt(x + 1);
  return { spunMs: ms, x: x > 0 };
}
