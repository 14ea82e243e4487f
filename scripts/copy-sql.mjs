// Copies the migration and routine .sql files next to the compiled JavaScript, which tsc does not do. The folders
// are emptied first: a file renamed or removed in src/ must not linger in dist/, where the migrator would load it.
import { cpSync, rmSync } from 'node:fs';

for (const folder of ['migrations', 'routines']) {
  rmSync(`dist/db/${folder}`, { recursive: true, force: true });
  cpSync(`src/db/${folder}`, `dist/db/${folder}`, { recursive: true });
}
