/** Command-line options of `npm run bench`. */

export interface CliOptions {
  quick: boolean;
  rounds: number | null;
  only: string[] | null;
  peers: string[] | null;
  /** Overrides of the multi-process and realistic-handler sizes. */
  processes: number[] | null;
  /** Override of the drain scenario's sizes. */
  drainTasks: number[] | null;
  multiprocessTasks: number | null;
  realisticTasks: number | null;
  help: boolean;
}

export const USAGE = `usage: npm run bench -- [--quick] [--rounds N] [--only SCENARIOS] [--peers PEERS]
                       [--processes LIST] [--drain-tasks LIST] [--multiprocess-tasks N] [--realistic-tasks N]

  --quick           small sizes and 1 round (a few minutes)
  --rounds N        rounds of every scenario (default: 3, but 1 for backlog; --quick: 1)
  --only LIST       comma-separated scenarios: bulk,drain,latency,backlog,recovery,multiprocess,realistic
  --peers LIST      comma-separated subjects or packages, e.g. horsies,graphile-worker,bullmq-redis
                    (a package name selects all its variants)
  --processes LIST  multiprocess: worker processes per case (default 1,2,4)
  --drain-tasks LIST
                    drain: tasks per case (default 10000,100000; --quick: 5000)
  --multiprocess-tasks N
                    multiprocess: tasks drained per sample (default 20,000; --quick: 3,000)
  --realistic-tasks N
                    realistic: tasks drained per sample (default 20,000; --quick: 3,000)

Uses DATABASE_URL when set, otherwise starts an embedded PostgreSQL; uses /usr/bin/redis-server when
installed for bullmq-redis.`;

export function parseArgs(args: string[]): CliOptions {
  const options: CliOptions = {
    quick: false,
    rounds: null,
    only: null,
    peers: null,
    processes: null,
    drainTasks: null,
    multiprocessTasks: null,
    realisticTasks: null,
    help: false,
  };
  const count = (value: string | undefined, flag: string, max: number): number => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < 1 || n > max)
      throw new Error(`${flag} needs an integer from 1 to ${max}`);
    return n;
  };
  const list = (value: string | undefined, flag: string): string[] => {
    if (!value || value.startsWith('--')) throw new Error(`${flag} needs a comma-separated list`);
    return value
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean);
  };
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string;
    const [flag, inline] = arg.includes('=')
      ? [arg.slice(0, arg.indexOf('=')), arg.slice(arg.indexOf('=') + 1)]
      : [arg, undefined];
    const value = (): string | undefined => inline ?? args[++i];
    switch (flag) {
      case '--quick':
        options.quick = true;
        break;
      case '--rounds': {
        const n = Number(value());
        if (!Number.isInteger(n) || n < 1 || n > 100)
          throw new Error('--rounds needs an integer from 1 to 100');
        options.rounds = n;
        break;
      }
      case '--only':
        options.only = list(value(), '--only');
        break;
      case '--peers':
        options.peers = list(value(), '--peers');
        break;
      case '--processes':
        options.processes = list(value(), '--processes').map((p) => count(p, '--processes', 32));
        break;
      case '--drain-tasks':
        options.drainTasks = list(value(), '--drain-tasks').map((n) => count(n, '--drain-tasks', 10_000_000));
        break;
      case '--multiprocess-tasks':
        options.multiprocessTasks = count(value(), '--multiprocess-tasks', 10_000_000);
        break;
      case '--realistic-tasks':
        options.realisticTasks = count(value(), '--realistic-tasks', 10_000_000);
        break;
      case '--help':
      case '-h':
        options.help = true;
        break;
      default:
        throw new Error(`unknown argument: ${arg}`);
    }
  }
  return options;
}
