// Copies the migration .sql files next to the compiled JavaScript, which tsc does not do.
import { cpSync } from 'node:fs';

cpSync('src/db/migrations', 'dist/db/migrations', { recursive: true });
