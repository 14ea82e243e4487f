/**
 * A TCP proxy between the fault run's workers and PostgreSQL (or PgBouncer), which can break the connections it
 * carries the ways a network does:
 *
 * - `closeAll()`: every connection closed at once, both ends (a firewall reset, a pooler restart);
 * - `stall(ms)`: half-open for a while: nothing is forwarded in either direction and nothing is closed, then the
 *   bytes held back are delivered in order (a partition that heals before TCP gives up);
 * - `delay(ms, forMs)`: every chunk forwarded `ms` later than it arrived, in order, for a while.
 *
 * Connections opened during a stall are accepted and held like the others.
 */
import { Socket, createServer } from 'node:net';
import type { Server } from 'node:net';

/** One direction of one connection: chunks waiting to be written, each with the time it may go. */
interface Pipe {
  from: Socket;
  to: Socket;
  queue: Array<{ chunk: Buffer; due: number }>;
  lastDue: number;
  timer: NodeJS.Timeout | null;
}

/** A running proxy. */
export class FaultProxy {
  private readonly sockets = new Set<Socket>();
  private stalledUntil = 0;
  private latencyMs = 0;
  private latencyUntil = 0;
  private readonly pipes = new Set<Pipe>();

  private constructor(
    private readonly server: Server,
    /** The port it listens on (127.0.0.1). */
    readonly port: number,
  ) {}

  /** Starts a proxy on a free loopback port that forwards to `target`. */
  static async start(target: { host: string; port: number }): Promise<FaultProxy> {
    let proxy: FaultProxy | null = null;
    const server = createServer((client) => proxy?.accept(client, target));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    const address = server.address();
    if (!address || typeof address !== 'object') throw new Error('the fault proxy has no port');
    proxy = new FaultProxy(server, address.port);
    return proxy;
  }

  /** Connections open now. */
  get connections(): number {
    return this.sockets.size / 2;
  }

  /** Closes every connection, both ends. Returns how many were closed. */
  closeAll(): number {
    const n = this.connections;
    for (const socket of this.sockets) socket.destroy();
    return n;
  }

  /** Stops forwarding, in both directions and on every connection, for `ms`; nothing is closed. */
  stall(ms: number): void {
    this.stalledUntil = Math.max(this.stalledUntil, Date.now() + ms);
    const until = this.stalledUntil;
    for (const pipe of this.pipes) this.schedule(pipe, until);
  }

  /** Delays every chunk by `ms` for the next `forMs`. */
  delay(ms: number, forMs: number): void {
    this.latencyMs = ms;
    this.latencyUntil = Date.now() + forMs;
  }

  /** Closes every connection and stops listening. */
  async stop(): Promise<void> {
    for (const pipe of this.pipes) if (pipe.timer) clearTimeout(pipe.timer);
    this.closeAll();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: Socket, target: { host: string; port: number }): void {
    const upstream = new Socket();
    this.sockets.add(client);
    this.sockets.add(upstream);
    const up = this.pipe(client, upstream);
    const down = this.pipe(upstream, client);
    const close = (): void => {
      for (const pipe of [up, down]) {
        if (pipe.timer) clearTimeout(pipe.timer);
        this.pipes.delete(pipe);
      }
      this.sockets.delete(client);
      this.sockets.delete(upstream);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', close);
    client.on('close', close);
    upstream.on('error', close);
    upstream.on('close', close);
    upstream.connect(target.port, target.host);
  }

  private pipe(from: Socket, to: Socket): Pipe {
    const pipe: Pipe = { from, to, queue: [], lastDue: 0, timer: null };
    this.pipes.add(pipe);
    from.on('data', (chunk: Buffer) => {
      const now = Date.now();
      const latency = now < this.latencyUntil ? this.latencyMs : 0;
      const due = Math.max(now + latency, pipe.lastDue, this.stalledUntil);
      pipe.lastDue = due;
      // A socket still connecting buffers what it is given; writing at once keeps the order too.
      if (due <= now && pipe.queue.length === 0) {
        to.write(chunk);
        return;
      }
      pipe.queue.push({ chunk, due });
      this.schedule(pipe, pipe.queue[0]!.due);
    });
    return pipe;
  }

  private schedule(pipe: Pipe, at: number): void {
    if (pipe.queue.length === 0 && at <= Date.now()) return;
    if (pipe.timer) clearTimeout(pipe.timer);
    pipe.timer = setTimeout(() => this.flush(pipe), Math.max(0, at - Date.now()));
  }

  private flush(pipe: Pipe): void {
    pipe.timer = null;
    const now = Date.now();
    if (now < this.stalledUntil) {
      this.schedule(pipe, this.stalledUntil);
      return;
    }
    while (pipe.queue.length > 0 && pipe.queue[0]!.due <= now) pipe.to.write(pipe.queue.shift()!.chunk);
    if (pipe.queue.length > 0) this.schedule(pipe, pipe.queue[0]!.due);
  }
}
