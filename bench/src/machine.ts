/** What the results were measured on: hardware, runtimes, servers and package versions. */
import { readFileSync } from 'node:fs';
import { cpus, freemem, loadavg, platform, release, totalmem } from 'node:os';
import { fileURLToPath } from 'node:url';

export interface MachineInfo {
  cpuModel: string;
  cpus: number;
  memoryGiB: number;
  freeMemoryGiB: number;
  os: string;
  loadAverage: number[];
  node: string;
  postgres: string;
  postgresSource: string;
  redis: string;
  packages: Record<string, string>;
}

const BENCH_DIR = fileURLToPath(new URL('..', import.meta.url));

function packageVersion(path: string): string {
  try {
    return (JSON.parse(readFileSync(path, 'utf8')) as { version?: string }).version ?? 'unknown';
  } catch {
    return 'not installed';
  }
}

export function machineInfo(postgres: { version: string; source: string }, redis: string): MachineInfo {
  const list = cpus();
  const packages: Record<string, string> = {
    horsies: `${packageVersion(`${BENCH_DIR}../package.json`)} (this checkout, built to dist/)`,
  };
  for (const name of ['graphile-worker', 'pg-boss', 'bullmq', 'ioredis', 'pg']) {
    packages[name] = packageVersion(`${BENCH_DIR}node_modules/${name}/package.json`);
  }
  return {
    cpuModel: list[0]?.model.trim() ?? 'unknown',
    cpus: list.length,
    memoryGiB: Math.round((totalmem() / 2 ** 30) * 10) / 10,
    freeMemoryGiB: Math.round((freemem() / 2 ** 30) * 10) / 10,
    os: `${platform()} ${release()}`,
    loadAverage: loadavg().map((l) => Math.round(l * 100) / 100),
    node: process.version,
    postgres: postgres.version,
    postgresSource: postgres.source,
    redis,
    packages,
  };
}

export function renderMachine(info: MachineInfo): string {
  return [
    `machine:  ${info.cpus} x ${info.cpuModel}, ${info.memoryGiB} GiB memory (${info.freeMemoryGiB} GiB free), ${info.os}, ` +
      `load average ${info.loadAverage.join(' ')} at the start`,
    `runtime:  Node.js ${info.node}`,
    `servers:  PostgreSQL ${info.postgres} (${info.postgresSource}); Redis ${info.redis}`,
    `packages: ${Object.entries(info.packages)
      .map(([name, version]) => `${name} ${version}`)
      .join(', ')}`,
  ].join('\n');
}
