/**
 * Talks to the dashboard's JSON API (relative URLs: the dashboard may be mounted under any path). What each endpoint
 * answers is typed in `src/dashboard/contract.ts`, which the server declares its answers with too.
 */

const TOKEN_KEY = 'horsies-dashboard-token';

/** The token (for actions, and for reads where the server asks for one), kept for this browser tab only. */
export function storedToken(): string {
  return sessionStorage.getItem(TOKEN_KEY) ?? '';
}

/** Keeps (or, given '', forgets) the token for actions. */
export function storeToken(token: string): void {
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  else sessionStorage.removeItem(TOKEN_KEY);
}

/** An answer other than 2xx, with the server's message. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

async function answer<T>(response: Response): Promise<T> {
  const body = (await response.json().catch(() => ({}))) as { error?: string };
  if (!response.ok) throw new ApiError(response.status, body.error ?? `HTTP ${response.status}`);
  return body as T;
}

/** The headers of a request: the stored token, when there is one (reads may need it too). */
export function authHeaders(): Record<string, string> {
  const token = storedToken();
  return token ? { 'x-horsies-token': token } : {};
}

/** GET `api/<path>`. */
export async function get<T>(path: string): Promise<T> {
  return answer<T>(
    await fetch(`api/${path}`, {
      headers: { accept: 'application/json', ...authHeaders() },
      credentials: 'omit',
    }),
  );
}

/** POST `api/<path>` as an action: with the stored token in its header. */
export async function act<T>(path: string, body: unknown = {}): Promise<T> {
  const headers: Record<string, string> = { 'content-type': 'application/json', ...authHeaders() };
  return answer<T>(
    await fetch(`api/${path}`, { method: 'POST', headers, body: JSON.stringify(body), credentials: 'omit' }),
  );
}
