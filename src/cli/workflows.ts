/**
 * `horsies workflows ...`: list workflow runs (a run's children with `--parent`), show one with its graph, and
 * pause, resume, cancel or retry the failed nodes of one, through the app's workflow handles.
 */
import { InvalidArgumentError, Option } from 'commander';
import type { Command } from 'commander';
import type { App } from '../client/App.js';
import { loadApp } from '../client/loadApp.js';
import {
  WORKFLOW_STATUSES,
  WorkflowGet,
  WorkflowList,
  WorkflowListChildren,
  WorkflowNodeGraph,
} from '../db/workflows.js';
import type { WorkflowRow, WorkflowStatus } from '../db/workflows.js';
import { HorsiesError } from '../errors.js';
import { toWorkflowInfo } from '../workflow/WorkflowHandle.js';
import type { WorkflowInfo } from '../workflow/WorkflowHandle.js';
import type { SignalReceipt } from '../workflow/signals.js';
import { dagNode } from '../workflow/dagNode.js';
import { renderDag } from './dag.js';
import { formatTable } from './format.js';
import { withApp, withConnection } from './shared.js';
import type { ConnectionOptions } from './shared.js';

function status(value: string): WorkflowStatus {
  const upper = value.trim().toUpperCase();
  if (!(WORKFLOW_STATUSES as readonly string[]).includes(upper)) {
    throw new InvalidArgumentError(`unknown status ${upper}; use ${WORKFLOW_STATUSES.join(', ')}`);
  }
  return upper as WorkflowStatus;
}

function positiveInt(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError('must be a positive integer');
  return n;
}

function notFound(id: string): HorsiesError {
  return new HorsiesError('WORKFLOW_NOT_FOUND', `no workflow with id ${id}`);
}

/** A workflow as `list --json` and `show --json` print it: the library's view, with its result and params. */
function toJson(row: WorkflowRow): Record<string, unknown> {
  return { ...toWorkflowInfo(row), result: row.result, params: row.params };
}

/** At most `max` characters of JSON, with a note of what was cut. */
function clip(value: unknown, max = 600): string {
  const text = JSON.stringify(value);
  if (text.length <= max) return text;
  return `${text.slice(0, max)}… (${text.length.toLocaleString('en-US')} characters; --json prints all)`;
}

function duration(from: Date | null, to: Date | null): string {
  if (!from || !to) return '';
  const ms = to.getTime() - from.getTime();
  return ms < 10_000 ? ` (${ms} ms)` : ` (${(ms / 1000).toFixed(1)} s)`;
}

/** The workflow's own lines above its graph; `parentNode` names the node of the parent that runs a child. */
function describeWorkflow(row: WorkflowRow, parentNode: string | null): string[] {
  const lines = [`workflow  ${row.id}`, `name      ${row.name}`, `status    ${row.status}`];
  if (row.parent_workflow_id !== null) {
    lines.push(`parent    ${row.parent_workflow_id} (node ${parentNode ?? `#${row.parent_node_index}`})`);
    lines.push(`root      ${row.root_workflow_id} (depth ${row.depth})`);
  }
  lines.push(
    `nodes     ${row.nodes_terminal}/${row.nodes_total} terminal`,
    `on error  ${row.on_error}`,
    `sent      ${row.sent_at.toISOString()}`,
  );
  if (row.started_at) lines.push(`started   ${row.started_at.toISOString()}`);
  if (row.completed_at) {
    lines.push(`completed ${row.completed_at.toISOString()}${duration(row.started_at, row.completed_at)}`);
  }
  const envelope = row.result as {
    ok?: unknown;
    err?: { code?: string; message?: string; data?: unknown };
  } | null;
  if (envelope && 'ok' in envelope) lines.push(`result    ${clip(envelope.ok)}`);
  if (envelope?.err) {
    lines.push(`error     ${envelope.err.code ?? row.error_code ?? ''}: ${envelope.err.message ?? ''}`);
    const data = envelope.err.data as { node?: string; error?: unknown } | undefined;
    if (data?.node !== undefined) lines.push(`  node    ${data.node}`);
    if (data?.error !== undefined && data.error !== null) lines.push(`  cause   ${clip(data.error)}`);
    if (data && data.node === undefined) lines.push(`  data    ${clip(data)}`);
  }
  return lines;
}

/** A control command of `horsies workflows`. */
type Operation = 'pause' | 'resume' | 'cancel' | 'retry-failed';

/** What a control command did, as `--json` prints it. */
interface ControlReport {
  id: string;
  operation: Operation;
  /**
   * True when the workflow is (now) where the command puts it: changed by it, or already there (pause of a
   * PAUSED run, resume of a RUNNING one, cancel of a CANCELLED one). False when the command does not apply to
   * the run's status; the command then exits 1.
   */
  applied: boolean;
  /** The workflow's status afterwards. */
  status: WorkflowStatus;
  /** The workflows it changed: the one named first, then the child workflows that followed. */
  changed: string[];
  tasksCancelled?: number;
  tasksStopping?: number;
  reopened?: number;
  /** Subworkflow nodes READY without their child run (no definition of the child known to this command). */
  waitingForChild: { workflowId: string; node: string; workflow: string }[];
  /** What happened, in words. */
  message: string;
}

/** Child workflows named in a report before the rest are counted. */
const CHILDREN_SHOWN = 20;

function plural(n: number, word: string): string {
  return `${n.toLocaleString('en-US')} ${word}${n === 1 ? '' : 's'}`;
}

/** `CHANGED workflow <id> (<name>)` and what happened to the run itself, or why nothing did. */
function describeOutcome(
  operation: Operation,
  id: string,
  name: string,
  status: WorkflowStatus,
  changedIt: boolean,
  extra: { tasksCancelled?: number; tasksStopping?: number; reopened?: number },
): { applied: boolean; lines: string[] } {
  const run = `workflow ${id} (${name})`;
  const terminal = status === 'COMPLETED' || status === 'FAILED' || status === 'CANCELLED';
  switch (operation) {
    case 'pause':
      if (changedIt)
        return {
          applied: true,
          lines: [
            `paused ${run}`,
            'running tasks finish and keep their results; tasks that had not started wait for resume',
          ],
        };
      if (status === 'PAUSED') return { applied: true, lines: [`${run} is already PAUSED; nothing changed`] };
      return {
        applied: false,
        lines: [`${run} is ${status}: only a RUNNING workflow can be paused; nothing changed`],
      };
    case 'resume':
      if (changedIt)
        return {
          applied: true,
          lines: [
            terminal
              ? `resumed ${run}: nothing was left to run, it ended ${status}`
              : `resumed ${run}: ${status}, every node whose dependencies are met is enqueued`,
          ],
        };
      if (status === 'RUNNING')
        return { applied: true, lines: [`${run} is already RUNNING; nothing changed`] };
      return {
        applied: false,
        lines: [`${run} is ${status}: only a PAUSED workflow can be resumed; nothing changed`],
      };
    case 'cancel':
      if (changedIt) {
        const cancelled = extra.tasksCancelled ?? 0;
        const stopping = extra.tasksStopping ?? 0;
        const lines = [`cancelled ${run}; every node that had not started is SKIPPED`];
        lines.push(
          `tasks: ${plural(cancelled, 'task')} cancelled before ${cancelled === 1 ? 'it' : 'they'} started, ` +
            `${plural(stopping, 'running task')} asked to stop` +
            (stopping > 0 ? ' (a run that still returns keeps its result on its node)' : ''),
        );
        return { applied: true, lines };
      }
      if (status === 'CANCELLED')
        return { applied: true, lines: [`${run} is already CANCELLED; nothing changed`] };
      return {
        applied: false,
        lines: [`${run} already ended ${status}: it cannot be cancelled; nothing changed`],
      };
    case 'retry-failed':
      if (changedIt) {
        const reopened = extra.reopened ?? 0;
        return {
          applied: true,
          lines: [
            reopened === 0
              ? `${run} had no failed node: it is ${status} again`
              : `retrying ${run}: ${plural(reopened, 'node')} reopened (its failed nodes and the nodes ` +
                `skipped after them); it is ${status}`,
          ],
        };
      }
      return {
        applied: false,
        lines: [
          `${run} is ${status}: only a FAILED or PAUSED workflow's failed nodes can be run again; nothing changed`,
        ],
      };
  }
}

/** What `workflows signal` says it did. */
function signalMessage(id: string, node: string, receipt: SignalReceipt): string {
  const at = `node "${node}" of workflow ${id}`;
  switch (receipt.delivered) {
    case 'resumed':
      return `${at} completed with the signal (delivery ${receipt.id})`;
    case 'kept':
      return `${at} is not waiting yet: the signal is kept for it (delivery ${receipt.id})`;
    case 'duplicate':
      return `${at} already has delivery ${receipt.id}; nothing changed`;
    case 'ignored':
      return `${at} has ended (or its run has); nothing stored`;
  }
}

/** Runs `fn` with the app of `--app` (its database, and the workflows it defines), else on the connection options. */
async function withControlApp<T>(
  options: ConnectionOptions & { app?: string; export?: string },
  fn: (app: App) => Promise<T>,
): Promise<T> {
  if (!options.app) return withApp(options, fn);
  const app = await loadApp(options.app, options.export);
  try {
    return await fn(app);
  } finally {
    await app.close();
  }
}

/** Runs one control command on workflow `id` and reports it; an unknown id is an error. */
async function control(
  app: App,
  operation: Operation,
  id: string,
  knowsChildren: boolean,
): Promise<ControlReport> {
  const handle = app.getWorkflow(id);
  const before = await handle.info();
  if (!before) throw notFound(id);
  let result: { status: WorkflowStatus | null; changed: string[] } & {
    tasksCancelled?: number;
    tasksStopping?: number;
    reopened?: number;
  };
  if (operation === 'pause') result = await handle.pause();
  else if (operation === 'resume') result = await handle.resume();
  else if (operation === 'cancel') result = await handle.cancel();
  else result = await handle.retryFailed();
  // Gone between the read and the operation (pruned by retention): as unknown as never there.
  if (result.status === null) throw notFound(id);
  const extra = {
    tasksCancelled: result.tasksCancelled,
    tasksStopping: result.tasksStopping,
    reopened: result.reopened,
  };
  const { applied, lines } = describeOutcome(
    operation,
    id,
    before.name,
    result.status,
    result.changed.includes(id),
    extra,
  );
  const children = result.changed.filter((c) => c !== id);
  if (children.length > 0) {
    const verb = { pause: 'paused', resume: 'resumed', cancel: 'cancelled', 'retry-failed': 'changed' }[
      operation
    ];
    lines.push(`${verb} with it: ${plural(children.length, 'child workflow')}`);
    const infos = await Promise.all(children.slice(0, CHILDREN_SHOWN).map((c) => app.getWorkflow(c).info()));
    const rows = children.slice(0, CHILDREN_SHOWN).map((c, i) => {
      const info: WorkflowInfo | null = infos[i] ?? null;
      return {
        id: c,
        name: info?.name ?? '',
        status: info?.status ?? 'gone',
        depth: String(info?.depth ?? ''),
      };
    });
    lines.push(
      ...formatTable(rows)
        .split('\n')
        .map((l) => `  ${l}`),
    );
    if (children.length > CHILDREN_SHOWN) {
      lines.push(
        `  and ${(children.length - CHILDREN_SHOWN).toLocaleString('en-US')} more (--json lists all)`,
      );
    }
  }
  // Subworkflow nodes a resume, a retry or a parent's step made READY, whose child this command could not start.
  const waitingForChild: ControlReport['waitingForChild'] = [];
  if (!knowsChildren && operation !== 'pause') {
    const looked = [...result.changed.slice(0, CHILDREN_SHOWN + 1)];
    if (operation === 'cancel' && before.parentId) looked.push(before.parentId);
    for (const workflowId of looked) {
      const nodes = await app.db.run(WorkflowNodeGraph, { workflowId });
      for (const n of nodes) {
        if (n.subworkflow && n.status === 'READY' && n.child_workflow_id === null) {
          waitingForChild.push({ workflowId, node: n.node_id, workflow: n.subworkflow });
        }
      }
    }
    if (waitingForChild.length > 0) {
      const names = [...new Set(waitingForChild.map((w) => `"${w.workflow}"`))].join(', ');
      lines.push(
        `note: ${plural(waitingForChild.length, 'subworkflow node')} READY without ${waitingForChild.length === 1 ? 'its' : 'their'} ` +
          `child run (workflow ${names}): a worker of the app that defines it starts the child in its recovery ` +
          'pass; or run this command with --app <module> to start it now',
      );
    }
  }
  return {
    id,
    operation,
    applied,
    status: result.status,
    changed: result.changed,
    ...(operation === 'cancel'
      ? { tasksCancelled: result.tasksCancelled ?? 0, tasksStopping: result.tasksStopping ?? 0 }
      : {}),
    ...(operation === 'retry-failed' ? { reopened: result.reopened ?? 0 } : {}),
    waitingForChild,
    message: lines.join('\n'),
  };
}

const CONTROL: readonly { operation: Operation; description: string; startsChildren: boolean }[] = [
  {
    operation: 'pause',
    description:
      'pause a RUNNING workflow and its running child workflows: running tasks finish, nothing new starts',
    startsChildren: false,
  },
  {
    operation: 'resume',
    description: 'resume a PAUSED workflow and its paused child workflows: what is ready runs again',
    startsChildren: true,
  },
  {
    operation: 'cancel',
    description:
      'cancel a workflow and every live child workflow: tasks not started cancelled, running ones asked to stop',
    startsChildren: true,
  },
  {
    operation: 'retry-failed',
    description:
      'run the failed nodes of a FAILED or PAUSED workflow again, with the nodes skipped after them',
    startsChildren: true,
  },
];

/** Adds `workflows list|show|pause|resume|cancel|retry-failed` to the program. */
export function addWorkflowCommands(program: Command): void {
  const workflows = program.command('workflows').description('inspect and control workflow runs');

  withConnection(workflows.command('list'))
    .description('list workflow runs, newest first')
    .addOption(
      new Option('--status <status>', `only this status (${WORKFLOW_STATUSES.join(', ')})`).argParser(status),
    )
    .option('--name <name>', 'workflow name')
    .option('--parent <id>', 'only the child workflows of this run (started by its subworkflow nodes)')
    .option('--before <id>', 'the page after this workflow (the last id of the previous page)')
    .addOption(new Option('--limit <n>', 'most rows').argParser(positiveInt).default(50))
    .option('--json', 'print JSON lines instead of a table')
    .action(
      async (
        options: ConnectionOptions & {
          status?: WorkflowStatus;
          name?: string;
          parent?: string;
          before?: string;
          limit: number;
          json?: boolean;
        },
      ) => {
        await withApp(options, async (app) => {
          let before: { sentAt: Date; id: string } | null = null;
          if (options.before !== undefined) {
            const [anchor] = await app.db.run(WorkflowGet, { id: options.before });
            if (!anchor) throw notFound(options.before);
            before = { sentAt: anchor.sent_at, id: anchor.id };
          }
          const filter = {
            status: options.status ?? null,
            name: options.name ?? null,
            before,
            limit: options.limit,
          };
          let rows: WorkflowRow[];
          if (options.parent !== undefined) {
            const [parent] = await app.db.run(WorkflowGet, { id: options.parent });
            if (!parent) throw notFound(options.parent);
            rows = await app.db.run(WorkflowListChildren, { parentId: parent.id, ...filter });
          } else {
            rows = await app.db.run(WorkflowList, filter);
          }
          if (options.json) {
            for (const row of rows) console.log(JSON.stringify(toJson(row)));
            return;
          }
          if (rows.length === 0) {
            console.log('no workflows match');
            return;
          }
          // Child workflows say where they hang; a page of root runs keeps the short table.
          const nested = rows.some((w) => w.parent_workflow_id !== null);
          console.log(
            formatTable(
              rows.map((w) => ({
                id: w.id,
                name: w.name,
                status: w.status,
                nodes: `${w.nodes_terminal}/${w.nodes_total}`,
                sent: w.sent_at.toISOString(),
                completed: w.completed_at?.toISOString() ?? '',
                error: w.error_code ?? '',
                ...(nested ? { depth: String(w.depth), parent: w.parent_workflow_id ?? '' } : {}),
              })),
            ),
          );
          if (rows.length === options.limit) console.log(`\nnext page: --before ${rows.at(-1)!.id}`);
        });
      },
    );

  withConnection(workflows.command('show'))
    .description("show one workflow run: its status, result or error, and its graph with each node's status")
    .argument('<id>', 'workflow id')
    .addOption(
      new Option('--max-per-layer <n>', 'summarise layers of the graph with more nodes than this')
        .argParser(positiveInt)
        .default(40),
    )
    .addOption(
      new Option('--max-layers <n>', 'beyond this many layers, draw runs of layers of one status as one line')
        .argParser(positiveInt)
        .default(40),
    )
    .option('--json', 'print the workflow and its nodes as JSON')
    .action(
      async (
        id: string,
        options: ConnectionOptions & { maxPerLayer: number; maxLayers: number; json?: boolean },
      ) => {
        await withApp(options, async (app) => {
          const [row] = await app.db.run(WorkflowGet, { id });
          if (!row) throw notFound(id);
          const nodes = (await app.db.run(WorkflowNodeGraph, { workflowId: id })).map(dagNode);
          if (options.json) {
            console.log(JSON.stringify({ ...toJson(row), nodes }, null, 2));
            return;
          }
          let parentNode: string | null = null;
          if (row.parent_workflow_id !== null) {
            const siblings = await app.db.run(WorkflowNodeGraph, { workflowId: row.parent_workflow_id });
            parentNode = siblings.find((n) => n.node_index === row.parent_node_index)?.node_id ?? null;
          }
          const lines = [
            ...describeWorkflow(row, parentNode),
            '',
            renderDag(nodes, { maxPerLayer: options.maxPerLayer, maxLayers: options.maxLayers }),
          ];
          if (nodes.some((n) => n.subworkflow)) {
            lines.push('', `child workflows: horsies workflows list --parent ${row.id}`);
          }
          console.log(lines.join('\n'));
        });
      },
    );

  withConnection(workflows.command('signal'))
    .description(
      'deliver a signal to a wait node of a run (wf.waitFor), validated with the schema the app declares for it',
    )
    .argument('<id>', 'workflow id')
    .argument('<node>', 'id of the wait node')
    .argument('<payload>', 'the payload, as JSON')
    .requiredOption(
      '--app <module>',
      "file that exports the app, whose workflows declare the signal's schema",
    )
    .option('--export <name>', 'name of the export that holds the app')
    .option('--delivery-id <id>', 'id of the delivery: the same id to the same node again changes nothing')
    .option('--json', 'print what happened as one JSON object')
    .action(
      async (
        id: string,
        node: string,
        text: string,
        options: ConnectionOptions & { app: string; export?: string; deliveryId?: string; json?: boolean },
      ) => {
        let payload: unknown;
        try {
          payload = JSON.parse(text);
        } catch (error) {
          throw new HorsiesError('INVALID_PAYLOAD', `the payload is not JSON: ${(error as Error).message}`);
        }
        await withControlApp(options, async (app) => {
          const receipt = await app.signal(id, node, payload, { id: options.deliveryId });
          if (options.json) console.log(JSON.stringify({ workflowId: id, node, ...receipt }));
          else console.log(signalMessage(id, node, receipt));
        });
      },
    );

  for (const { operation, description, startsChildren } of CONTROL) {
    const command = withConnection(workflows.command(operation))
      .description(description)
      .argument('<id>', 'workflow id')
      .option('--json', 'print what happened as one JSON object');
    if (startsChildren) {
      command
        .option(
          '--app <module>',
          'file that exports the app: its database, and the workflows its subworkflow nodes start',
        )
        .option('--export <name>', 'name of the export that holds the app');
    }
    command.action(
      async (id: string, options: ConnectionOptions & { json?: boolean; app?: string; export?: string }) => {
        await withControlApp(options, async (app) => {
          const report = await control(app, operation, id, options.app !== undefined);
          if (options.json) {
            console.log(JSON.stringify(report));
          } else if (report.applied) {
            console.log(report.message);
          } else {
            console.error(`horsies: ${report.message}`);
          }
          if (!report.applied) process.exitCode = 1;
        });
      },
    );
  }
}
