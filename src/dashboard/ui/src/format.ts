/** Display helpers. */

/** A duration in the largest sensible unit: 850 ms, 12 s, 4 min, 3 h, 2 d. */
export function duration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(s < 10 ? 1 : 0)} s`;
  const m = s / 60;
  if (m < 60) return `${Math.round(m)} min`;
  const h = m / 60;
  if (h < 48) return `${h.toFixed(h < 10 ? 1 : 0)} h`;
  return `${Math.round(h / 24)} d`;
}

/** "12 s ago" for a past time, "in 4 min" for a future one, "" for none. */
export function ago(iso: string | null | undefined): string {
  if (!iso) return '';
  const delta = Date.now() - Date.parse(iso);
  return delta >= 0 ? `${duration(delta)} ago` : `in ${duration(-delta)}`;
}

/** Local date and time, to the second. */
export function time(iso: string | null | undefined): string {
  if (!iso) return '';
  const d = new Date(iso);
  return `${d.toLocaleDateString()} ${d.toLocaleTimeString()}`;
}

/** A count with thousands separators. */
export function count(n: number): string {
  return n.toLocaleString('en-US');
}
