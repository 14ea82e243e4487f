/** `horsies workflows ...`: list workflow runs and show one with its graph. */
import { InvalidArgumentError, Option } from 'commander';
import type { Command } from 'commander';
import { WorkflowGet, WorkflowList, WorkflowNodeGraph } from '../db/workflows.js';
import type { WorkflowRow, WorkflowStatus } from '../db/workflows.js';
import { HorsiesError } from '../errors.js';
import { dagNode, renderDag } from './dag.js';
import { formatTable } from './format.js';
import { withApp, withConnection } from './shared.js';
import type { ConnectionOptions } from './shared.js';

const WORKFLOW_STATUSES: readonly WorkflowStatus[] = [
  'PENDING',
  'RUNNING',
  'PAUSED',
  'COMPLETED',
  'FAILED',
  'CANCELLED',
];

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

/** A workflow as `list --json` and `show --json` print it. */
function toJson(row: WorkflowRow): Record<string, unknown> {
  return {
    id: row.id,
    name: row.name,
    status: row.status,
    onError: row.on_error,
    nodesTotal: row.nodes_total,
    nodesTerminal: row.nodes_terminal,
    errorCode: row.error_code,
    result: row.result,
    params: row.params,
    sentAt: row.sent_at,
    startedAt: row.started_at,
    completedAt: row.completed_at,
    updatedAt: row.updated_at,
  };
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

/** The workflow's own lines above its graph. */
function describeWorkflow(row: WorkflowRow): string[] {
  const lines = [
    `workflow  ${row.id}`,
    `name      ${row.name}`,
    `status    ${row.status}`,
    `nodes     ${row.nodes_terminal}/${row.nodes_total} terminal`,
    `on error  ${row.on_error}`,
    `sent      ${row.sent_at.toISOString()}`,
  ];
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

/** Adds `workflows list|show` to the program. */
export function addWorkflowCommands(program: Command): void {
  const workflows = program.command('workflows').description('inspect workflow runs');

  withConnection(workflows.command('list'))
    .description('list workflow runs, newest first')
    .addOption(
      new Option('--status <status>', `only this status (${WORKFLOW_STATUSES.join(', ')})`).argParser(status),
    )
    .option('--name <name>', 'workflow name')
    .option('--before <id>', 'the page after this workflow (the last id of the previous page)')
    .addOption(new Option('--limit <n>', 'most rows').argParser(positiveInt).default(50))
    .option('--json', 'print JSON lines instead of a table')
    .action(
      async (
        options: ConnectionOptions & {
          status?: WorkflowStatus;
          name?: string;
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
          const rows = await app.db.run(WorkflowList, {
            status: options.status ?? null,
            name: options.name ?? null,
            before,
            limit: options.limit,
          });
          if (options.json) {
            for (const row of rows) console.log(JSON.stringify(toJson(row)));
            return;
          }
          if (rows.length === 0) {
            console.log('no workflows match');
            return;
          }
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
          console.log(
            [
              ...describeWorkflow(row),
              '',
              renderDag(nodes, { maxPerLayer: options.maxPerLayer, maxLayers: options.maxLayers }),
            ].join('\n'),
          );
        });
      },
    );
}
