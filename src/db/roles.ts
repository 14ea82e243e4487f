/**
 * Least-privilege roles for one horsies schema, as SQL for a database owner or superuser to run (`horsies roles
 * --print-sql`, and docs/security.md):
 *
 *   migrator  owns the schema and everything in it; runs `horsies migrate`
 *   worker    reads and writes the rows of every horsies table (tasks, attempts, heartbeats, snapshots, the leader
 *             table, schedules, workflows), runs the routines, vacuums the task table (PostgreSQL 17 and later);
 *             creates, alters and drops nothing
 *   producer  sends tasks and starts workflows (INSERT), reads tasks, attempts and workflows; updates no task
 *             (a workflow start steps its own run: it updates workflow rows; a single send that hands its task
 *             to an idle worker takes one of the worker's registered slots in horsies_idle_slots)
 *
 * The roles are groups (NOLOGIN): give them to login roles with `GRANT horsies_worker TO app_worker_1`. Routines
 * run as their caller (none is SECURITY DEFINER), so what a role may do through `horsies_claim_tasks` and the
 * other routines is exactly what its table privileges allow; EXECUTE stays granted to PUBLIC, PostgreSQL's default.
 */
import { quoteIdentifier } from './sql.js';

/** The three role names. */
export interface RoleNames {
  migrator: string;
  worker: string;
  producer: string;
}

/** The default role names for a schema: `<schema>_migrator`, `<schema>_worker`, `<schema>_producer`. */
export function defaultRoleNames(schema: string): RoleNames {
  return { migrator: `${schema}_migrator`, worker: `${schema}_worker`, producer: `${schema}_producer` };
}

/** The tables a producer may insert into (sends, workflow starts) and read. */
const PRODUCER_WRITES = ['horsies_tasks', 'horsies_workflows', 'horsies_workflow_tasks'];
/** The tables a producer may also update: a workflow start steps its new run (starts its first nodes). */
const PRODUCER_STEPS = ['horsies_workflows', 'horsies_workflow_tasks'];
/** The tables a producer may only read (results, attempts, the schema's version). */
const PRODUCER_READS = ['horsies_task_attempts', 'horsies_schema_migrations', 'horsies_queue_state'];

/**
 * SQL that creates the roles (when missing) and grants them what they need on `schema`, in two parts: `setup`, run
 * once before the first `horsies migrate` (as a superuser or the database's owner), and `grants`, run after it and
 * again after every later migrate (it names the tables that exist). Both are idempotent.
 */
export function rolesSql(
  schema: string,
  roles: RoleNames = defaultRoleNames(schema),
): { setup: string; grants: string } {
  const s = quoteIdentifier(schema);
  const m = quoteIdentifier(roles.migrator);
  const w = quoteIdentifier(roles.worker);
  const p = quoteIdentifier(roles.producer);
  const literal = (text: string): string => `'${text.replace(/'/g, "''")}'`;
  const createRole = (name: string): string =>
    `DO $$ BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = ${literal(name)}) THEN
    CREATE ROLE ${quoteIdentifier(name)} NOLOGIN;
  END IF;
END $$;`;
  const setup = `-- Roles of schema ${schema}: run once, as a superuser or the database's owner, before the first horsies migrate.
${createRole(roles.migrator)}
${createRole(roles.worker)}
${createRole(roles.producer)}
-- The migrator owns the schema (horsies migrate runs CREATE SCHEMA IF NOT EXISTS, which needs CREATE on the database).
DO $$ BEGIN
  EXECUTE format('GRANT CREATE, CONNECT ON DATABASE %I TO %I', current_database(), ${literal(roles.migrator)});
  EXECUTE format('GRANT CONNECT ON DATABASE %I TO %I, %I', current_database(), ${literal(roles.worker)}, ${literal(roles.producer)});
END $$;
CREATE SCHEMA IF NOT EXISTS ${s} AUTHORIZATION ${m};
ALTER SCHEMA ${s} OWNER TO ${m};
-- Workers and producers may use the schema's objects, and create none.
REVOKE CREATE ON SCHEMA ${s} FROM PUBLIC;
GRANT USAGE ON SCHEMA ${s} TO ${w}, ${p};
-- Everything the migrator creates from now on: rows readable and writable by workers.
ALTER DEFAULT PRIVILEGES FOR ROLE ${m} IN SCHEMA ${s} GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO ${w};
ALTER DEFAULT PRIVILEGES FOR ROLE ${m} IN SCHEMA ${s} GRANT USAGE, SELECT ON SEQUENCES TO ${w};
`;
  const grants = `-- Grants on the tables of schema ${schema}: run after horsies migrate (as the migrator), and again after each later one.
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA ${s} TO ${w};
GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA ${s} TO ${w};
GRANT EXECUTE ON ALL ROUTINES IN SCHEMA ${s} TO ${w};
-- PostgreSQL 17 and later: workers may vacuum the task table (the maintenance leader's vacuum check).
DO $$ BEGIN
  IF current_setting('server_version_num')::int >= 170000 THEN
    EXECUTE format('GRANT MAINTAIN ON %I.horsies_tasks TO %I', ${literal(schema)}, ${literal(roles.worker)});
  END IF;
END $$;
REVOKE ALL ON ALL TABLES IN SCHEMA ${s} FROM ${p};
GRANT SELECT, INSERT ON ${PRODUCER_WRITES.map((t) => `${s}.${t}`).join(', ')} TO ${p};
GRANT UPDATE ON ${PRODUCER_STEPS.map((t) => `${s}.${t}`).join(', ')} TO ${p};
GRANT SELECT ON ${PRODUCER_READS.map((t) => `${s}.${t}`).join(', ')} TO ${p};
GRANT SELECT, UPDATE, DELETE ON ${s}.horsies_idle_slots TO ${p};
GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA ${s} TO ${p};
`;
  return { setup, grants };
}
