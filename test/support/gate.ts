/** A promise a test opens when it chooses: `wait` resolves once `open` is called (a handler held until then). */
export function gate(): { wait: Promise<void>; open: () => void } {
  let open: () => void = () => undefined;
  const wait = new Promise<void>((resolve) => (open = resolve));
  return { wait, open };
}
