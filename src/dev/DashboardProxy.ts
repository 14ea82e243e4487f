/**
 * The dashboard of `horsies dev` at one address for the whole session. The dashboard itself runs in the worker child,
 * on the app the child loaded (its declared schedules, its workflows), on a port of its own; a restart brings a
 * new child and a new port. This server keeps the address and passes every request to the current child's
 * dashboard, the live feed's event stream included (a restart ends the stream; the page reconnects). While no child
 * serves one (between a child's exit and the next one's start), it answers 503.
 */
import { createServer, request } from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';

/** See the module comment. */
export class DashboardProxy {
  private readonly server: Server;
  private target: number | null = null;

  constructor() {
    this.server = createServer((req, res) => this.forward(req, res));
  }

  /** Listens on 127.0.0.1: on `port`, or on any free port when it is taken (another dev loop). Returns the port. */
  async listen(port: number): Promise<number> {
    const listen = (p: number): Promise<void> =>
      new Promise<void>((resolvePromise, reject) => {
        this.server.once('error', reject);
        this.server.listen(p, '127.0.0.1', () => {
          this.server.off('error', reject);
          resolvePromise();
        });
      });
    try {
      await listen(port);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EADDRINUSE' || port === 0) throw error;
      await listen(0);
    }
    const address = this.server.address();
    return typeof address === 'object' && address ? address.port : port;
  }

  /** The port of the current child's dashboard on 127.0.0.1; null while none serves. */
  serve(port: number | null): void {
    this.target = port;
  }

  /** Closes the server and every connection to it. */
  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolvePromise) => this.server.close(() => resolvePromise()));
  }

  private forward(req: IncomingMessage, res: ServerResponse): void {
    if (this.target === null) {
      unavailable(res);
      return;
    }
    // Headers pass unchanged: the dashboard checks an action's Origin against the Host the browser used.
    const upstream = request(
      { host: '127.0.0.1', port: this.target, method: req.method, path: req.url, headers: req.headers },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    upstream.on('error', () => {
      if (res.headersSent) res.destroy();
      else unavailable(res);
    });
    res.on('close', () => upstream.destroy());
    req.pipe(upstream);
  }
}

function unavailable(res: ServerResponse): void {
  res
    .writeHead(503, { 'content-type': 'application/json; charset=utf-8', 'retry-after': '1' })
    .end(JSON.stringify({ error: 'the worker is restarting: try again in a moment' }));
}
