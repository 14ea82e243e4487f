/** What the router (main.tsx) gives a page. */
import type { ServerConfig } from '../../../contract.js';

/** What a page gets: the rest of the path, the query of the hash, and the server's settings. */
export interface PageProps {
  rest: string[];
  query: URLSearchParams;
  config: ServerConfig;
}
