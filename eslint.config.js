import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', '.horsies-dev/', 'bench/node_modules/', '.scratch/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      'no-restricted-imports': [
        'error',
        {
          paths: [
            { name: 'pg', message: 'Only src/db/ talks to PostgreSQL directly.', allowTypeImports: true },
          ],
        },
      ],
    },
  },
  {
    files: ['src/db/**', 'test/**', 'scripts/**', 'bench/**'],
    rules: { 'no-restricted-imports': 'off' },
  },
);
