// Copies the migration .sql files next to the compiled JavaScript, which tsc does not do. The folder is emptied
// first: a migration renamed or removed in src/ must not linger in dist/, where the migrator would load it.
import { cpSync, rmSync } from 'node:fs';

rmSync('dist/db/migrations', { recursive: true, force: true });
cpSync('src/db/migrations', 'dist/db/migrations', { recursive: true });
