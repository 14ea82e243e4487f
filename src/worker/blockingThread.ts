/**
 * Entry of a thread that runs blocking (CPU-bound) handlers, so they cannot starve the event loop that sends
 * the worker's heartbeats. The thread loads the app module itself, then runs one task per message. Error
 * classes are mapped to codes here, where the classes live.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { pino } from 'pino';
import { loadApp } from '../client/loadApp.js';
import type { TaskContext } from '../client/TaskDefinition.js';
import { HorsiesError, TaskError } from '../errors.js';
import type { ThreadReply, ThreadRequest } from './ThreadPool.js';
import { runHandler } from './runHandler.js';
import { toCanonicalJson } from '../json.js';
import { MAX_PROGRESS_BYTES, ProgressTooLargeError } from './ProgressReporter.js';
import { refuseTransaction } from './TransactionalFinish.js';

const { appModule, exportName } = workerData as { appModule: string; exportName?: string };
const app = await loadApp(appModule, exportName);
const logger = pino({ level: process.env.HORSIES_LOG_LEVEL || 'info' });
const controllers = new Map<string, AbortController>();
const port = parentPort!;

port.on('message', (message: ThreadRequest | { abort: string }) => {
  if ('abort' in message) {
    controllers.get(message.abort)?.abort(new Error('task stopped'));
    return;
  }
  void run(message).then((reply) => port.postMessage(reply));
});
port.postMessage({ ready: true });

async function run(request: ThreadRequest): Promise<ThreadReply> {
  const definition = app.tasks.get(request.taskName);
  if (!definition) {
    return {
      id: request.id,
      error: new TaskError(
        'UNHANDLED_ERROR',
        `task "${request.taskName}" is not in the thread's app`,
      ).toJSON(),
    };
  }
  const controller = new AbortController();
  controllers.set(request.id, controller);
  const ctx: TaskContext = {
    ...request.context,
    signal: controller.signal,
    logger: logger.child({ taskId: request.id, task: request.taskName, attempt: request.context.attempt }),
    progress: (value) => {
      const json = toCanonicalJson(value, 'progress');
      const size = Buffer.byteLength(json);
      if (size > MAX_PROGRESS_BYTES) throw new ProgressTooLargeError(request.id, size);
      port.postMessage({ progress: request.id, value: json });
    },
    transaction: () => refuseTransaction(request.id, true),
    step: () =>
      Promise.reject(
        new HorsiesError(
          'STEP_UNAVAILABLE',
          `task ${request.id}: ctx.step() is not available in blocking tasks`,
        ),
      ),
  };
  try {
    const outcome = await runHandler(definition, request.input, ctx, app.config.errorCodes);
    return outcome instanceof TaskError
      ? { id: request.id, error: outcome.toJSON() }
      : { id: request.id, ...outcome };
  } finally {
    controllers.delete(request.id);
  }
}
