/**
 * The checks a request must pass. Reads are open unless a read token is configured; then every API request
 * (the event stream too) must carry it, or the action token, in the `x-horsies-token` header. The static files of
 * the UI hold no data and are served to anyone.
 *
 * The checks an action request (anything that changes rows) must pass. Actions exist only when a token is
 * configured. A request carries the token in the `x-horsies-token` header: a page of another site cannot set a
 * custom header on a cross-site request without a CORS preflight, which the dashboard never approves, and it
 * does not know the token. The `Origin` and `Sec-Fetch-Site` headers, when the browser sends them, must say
 * same-origin as well, so a leaked token alone is not enough for a cross-site form either.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';

/** The header that carries the token. */
export const TOKEN_HEADER = 'x-horsies-token';

/** Why an action was refused, with its HTTP status; null when it may proceed. */
export interface Refusal {
  status: 403 | 401;
  message: string;
}

function digest(value: string): Buffer {
  return createHash('sha256').update(value).digest();
}

/** Compares in constant time (through digests, so lengths do not leak either). */
function sameSecret(given: string, expected: string): boolean {
  return timingSafeEqual(digest(given), digest(expected));
}

/** Checks an action request against the configured token (undefined: actions disabled). */
export function refuseAction(req: IncomingMessage, token: string | undefined): Refusal | null {
  if (!token) return { status: 403, message: 'actions are disabled: start the dashboard with a token' };
  const site = req.headers['sec-fetch-site'];
  if (site !== undefined && site !== 'same-origin' && site !== 'none') {
    return { status: 403, message: 'cross-site request refused' };
  }
  const origin = req.headers.origin;
  if (origin !== undefined) {
    let host: string | null;
    try {
      host = new URL(origin).host;
    } catch {
      host = null;
    }
    if (host === null || host !== req.headers.host)
      return { status: 403, message: 'cross-site request refused' };
  }
  const given = req.headers[TOKEN_HEADER];
  if (typeof given !== 'string' || !sameSecret(given, token)) {
    return { status: 401, message: `missing or wrong ${TOKEN_HEADER} header` };
  }
  return null;
}

/**
 * Checks an API read against the tokens that may read: none configured means reads are open. Either token
 * passes (the one for actions can read too). Every candidate is compared, so the time taken does not say which
 * was close.
 */
export function refuseRead(req: IncomingMessage, readTokens: readonly string[]): Refusal | null {
  if (readTokens.length === 0) return null;
  const given = req.headers[TOKEN_HEADER];
  if (typeof given !== 'string')
    return { status: 401, message: `reads need a token: send it in ${TOKEN_HEADER}` };
  let ok = false;
  for (const token of readTokens) ok = sameSecret(given, token) || ok;
  return ok ? null : { status: 401, message: `wrong ${TOKEN_HEADER} header` };
}
