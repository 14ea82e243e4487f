/**
 * A fixed pool of threads for blocking (CPU-bound) handlers. Each thread runs one task at a time; tasks queue
 * for a free thread. A thread whose task must stop (timeout, cancel, shutdown) gets an abort message, and is
 * terminated and replaced if the task does not return within the grace period: CPU-bound code never looks at
 * its signal, and terminating the thread is the only way to take its core back.
 */
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import { dirname, extname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Worker as Thread } from 'node:worker_threads';
import type { TaskWorkflowContext } from '../client/TaskDefinition.js';
import type { JsonValue } from '../types.js';

/** A task for a thread. */
export interface ThreadRequest {
  id: string;
  taskName: string;
  input: unknown;
  context: {
    taskId: string;
    taskName: string;
    queue: string;
    attempt: number;
    retryCount: number;
    workflow: TaskWorkflowContext | null;
  };
}

/** A progress report from a thread's handler: the value as canonical JSON text. */
export interface ThreadProgress {
  progress: string;
  value: string;
}

/** A thread's answer: the result as canonical JSON text, or an error. */
export type ThreadReply =
  { id: string; value: string } | { id: string; error: { code: string; message: string; data?: JsonValue } };

/** Settings of a {@link ThreadPool}. */
export interface ThreadPoolOptions {
  /** The module that exports the app (a path or file URL). */
  appModule: string;
  /** Its export holding the app, if not `default` or `app`. */
  exportName?: string;
  /** Number of threads. */
  size: number;
}

interface Slot {
  thread: Thread;
  ready: Promise<void>;
  busy: string | null;
}

interface Job {
  request: ThreadRequest;
  resolve: (reply: ThreadReply) => void;
  reject: (error: Error) => void;
  /** Called when a ready thread takes the task (its timeout starts then, not while it queues). */
  onStart?: () => void;
  /** Called with each progress report of the handler (JSON text). */
  onProgress?: (json: string) => void;
}

const entry = threadEntry();

/** Runs blocking handlers on worker threads. */
export class ThreadPool {
  private readonly slots: Slot[] = [];
  private readonly queue: Job[] = [];
  private readonly jobs = new Map<string, Job>();
  private closed = false;
  /** Threads that failed before they were ready, in a row: respawns back off so a broken module cannot spin. */
  private startFailures = 0;

  constructor(private readonly options: ThreadPoolOptions) {
    for (let i = 0; i < options.size; i += 1) this.slots.push(this.spawn());
  }

  /**
   * Runs one task on the next free thread; `onStart` is called when a ready thread takes it, `onProgress` with
   * each progress report of its handler.
   */
  run(
    request: ThreadRequest,
    onStart?: () => void,
    onProgress?: (json: string) => void,
  ): Promise<ThreadReply> {
    if (this.closed) return Promise.reject(new Error('thread pool closed'));
    return new Promise((resolve, reject) => {
      this.queue.push({ request, resolve, reject, onStart, onProgress });
      this.pump();
    });
  }

  /** Asks the task's handler to stop (its AbortSignal fires in the thread). */
  abort(taskId: string): void {
    const slot = this.slots.find((s) => s.busy === taskId);
    if (slot) slot.thread.postMessage({ abort: taskId });
    const queued = this.queue.findIndex((j) => j.request.id === taskId);
    if (queued >= 0)
      this.queue.splice(queued, 1)[0]?.reject(new Error('task stopped before a thread was free'));
  }

  /** Terminates the thread running the task and starts a fresh one in its place. */
  async terminate(taskId: string): Promise<void> {
    const index = this.slots.findIndex((s) => s.busy === taskId);
    const slot = this.slots[index];
    if (!slot) return;
    this.jobs.get(taskId)?.reject(new Error('thread terminated'));
    this.jobs.delete(taskId);
    this.slots[index] = this.spawn();
    await slot.thread.terminate();
    this.pump();
  }

  /** Terminates every thread. Idempotent. */
  async close(): Promise<void> {
    this.closed = true;
    for (const job of this.queue.splice(0)) job.reject(new Error('thread pool closed'));
    await Promise.all(this.slots.map((s) => s.thread.terminate()));
  }

  private spawn(): Slot {
    const thread = new Thread(entry, {
      workerData: { appModule: this.options.appModule, exportName: this.options.exportName },
    });
    let markReady: () => void = () => undefined;
    let failReady: (error: Error) => void = () => undefined;
    const ready = new Promise<void>((resolve, reject) => {
      markReady = resolve;
      failReady = reject;
    });
    ready.catch(() => undefined);
    const slot: Slot = { thread, ready, busy: null };
    let isReady = false;
    thread.on('message', (message: ThreadReply | ThreadProgress | { ready: true }) => {
      if ('ready' in message) {
        isReady = true;
        this.startFailures = 0;
        return markReady();
      }
      if ('progress' in message) {
        try {
          this.jobs.get(message.progress)?.onProgress?.(message.value);
        } catch {
          // Checked in the thread already; a value refused here is dropped.
        }
        return;
      }
      const job = this.jobs.get(message.id);
      this.jobs.delete(message.id);
      slot.busy = null;
      job?.resolve(message);
      this.pump();
    });
    thread.on('error', (error) => {
      failReady(error);
      if (slot.busy) {
        this.jobs.get(slot.busy)?.reject(error);
        this.jobs.delete(slot.busy);
      }
      slot.busy = null;
      if (!isReady) this.startFailures += 1;
      const delay = isReady ? 0 : Math.min(30_000, 250 * 2 ** Math.min(this.startFailures - 1, 7));
      const respawn = setTimeout(() => {
        const index = this.slots.indexOf(slot);
        if (index >= 0 && !this.closed) this.slots[index] = this.spawn();
        this.pump();
      }, delay);
      respawn.unref();
    });
    return slot;
  }

  private pump(): void {
    for (const slot of this.slots) {
      if (this.queue.length === 0) return;
      if (slot.busy) continue;
      const job = this.queue.shift()!;
      slot.busy = job.request.id;
      this.jobs.set(job.request.id, job);
      slot.ready.then(
        () => {
          job.onStart?.();
          slot.thread.postMessage(job.request);
        },
        (error: Error) => job.reject(error),
      );
    }
  }
}

// The thread's entry: the compiled module next to this one, or, when running from TypeScript sources, a small
// ESM bootstrap that registers tsx inside the thread before importing the TypeScript entry.
function threadEntry(): URL {
  const extension = extname(fileURLToPath(import.meta.url));
  const target = new URL(`./blockingThread${extension}`, import.meta.url);
  if (extension === '.js') return target;
  const tsx = pathToFileURL(tsxEsmApi()).href;
  const code = `const { register } = await import(${JSON.stringify(tsx)}); register(); await import(${JSON.stringify(target.href)});`;
  return new URL(`data:text/javascript,${encodeURIComponent(code)}`);
}

// The ESM build of tsx's API, read from its package exports: require.resolve would give the CommonJS build,
// whose register() cannot install the ESM loader.
function tsxEsmApi(): string {
  const require = createRequire(import.meta.url);
  const manifestPath = require.resolve('tsx/package.json');
  const manifest = JSON.parse(readFileSync(manifestPath, 'utf8')) as {
    exports: Record<string, { import: { default: string } }>;
  };
  return join(dirname(manifestPath), manifest.exports['./esm/api']!.import.default);
}
