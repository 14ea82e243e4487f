import js from '@eslint/js';
import tseslint from 'typescript-eslint';

const onlyDbTalksToPg = {
  name: 'pg',
  message: 'Only src/db/ talks to PostgreSQL directly.',
  allowTypeImports: true,
};

/**
 * The layering of src/: dependencies point one way. Leaf modules (errors, types, clock, retry, config) import
 * no folder; db/ imports only leaves; recovery/ never imports client/ or worker/; client/ never imports worker/;
 * metrics/ and tracing/ import none of the roles they record, recovery/ included; the workflow engine (step,
 * control, tree, recovery, wiring) never imports client/ or worker/; nothing but cli/ imports cli/. Type-only
 * imports count too: a layer must not know what sits above it. Cycles between files, which these patterns
 * cannot see, are dependency-cruiser's (.dependency-cruiser.mjs, also run by `npm run lint`).
 */
function layer(files, forbidden, why) {
  return {
    files,
    rules: {
      'no-restricted-imports': [
        'error',
        {
          // dev/ runs the embedded server, a process and not a statement: it connects to create the database.
          paths: files.some((f) => f.startsWith('src/db') || f.startsWith('src/dev'))
            ? []
            : [onlyDbTalksToPg],
          patterns: [{ group: forbidden, message: why }],
        },
      ],
    },
  };
}

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', '.horsies-dev/', 'bench/node_modules/', '.scratch/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      // Parts wired to each other through closures are declared with let and assigned once, after their users.
      'prefer-const': ['error', { ignoreReadBeforeAssign: true }],
      'no-restricted-imports': ['error', { paths: [onlyDbTalksToPg] }],
    },
  },
  {
    // cli/ is the top: its commands import the library, nothing in the library imports them. The layers below
    // repeat it in their own lists (a later entry replaces this rule's options for its files).
    files: ['src/**'],
    ignores: ['src/cli/**'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: [onlyDbTalksToPg],
          patterns: [{ regex: '^(\\.\\.?/)+cli/', message: 'Nothing outside src/cli/ imports src/cli/.' }],
        },
      ],
    },
  },
  layer(
    ['src/errors.ts', 'src/types.ts', 'src/clock.ts', 'src/retry.ts', 'src/config.ts'],
    ['./*/**'],
    'Leaf modules import no folder of the library.',
  ),
  layer(
    ['src/db/**'],
    [
      '../client/**',
      '../worker/**',
      '../recovery/**',
      '../cli/**',
      '../workflow/**',
      '../scheduler/**',
      '../dashboard/**',
    ],
    'db/ is the bottom layer: it imports only leaf modules.',
  ),
  layer(
    ['src/dev/**'],
    [
      '../client/**',
      '../worker/**',
      '../recovery/**',
      '../workflow/**',
      '../scheduler/**',
      '../dashboard/**',
      '../cli/**',
    ],
    'dev/ is development tooling under the CLI: it imports only leaf modules.',
  ),
  layer(
    ['src/recovery/**'],
    ['../client/**', '../worker/**', '../cli/**'],
    'recovery/ runs without the app or the worker: pass what it needs in.',
  ),
  layer(
    ['src/metrics/**', 'src/tracing/**'],
    [
      '../client/**',
      '../worker/**',
      '../cli/**',
      '../dashboard/**',
      '../workflow/**',
      '../scheduler/**',
      '../recovery/**',
    ],
    'metrics/ and tracing/ record what the app, the worker and maintenance tell them: they import none of them.',
  ),
  layer(
    ['src/client/**'],
    ['../worker/**', '../cli/**'],
    'client/ never depends on worker/: the worker takes a host.',
  ),
  layer(
    [
      'src/workflow/step.ts',
      'src/workflow/control.ts',
      'src/workflow/tree.ts',
      'src/workflow/WorkflowRecovery.ts',
      'src/workflow/wiring.ts',
    ],
    ['../client/**', '../worker/**', '../cli/**'],
    'The workflow engine runs from stored rows alone: recovery (and any worker) steps a workflow without its code.',
  ),
  {
    files: ['test/**', 'scripts/**', 'bench/**'],
    rules: { 'no-restricted-imports': 'off' },
  },
);
