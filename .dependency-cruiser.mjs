/**
 * The dependency rules of src/ that ESLint's import rules cannot see: no cycles between files, and the layer
 * rules below. `npm run lint` checks them (scripts/lint-deps.ts prints one line per violation); `npx depcruise
 * src --config` shows the same in dependency-cruiser's words. ESLint's `no-restricted-imports` (eslint.config.js)
 * holds the rest of the layering.
 *
 * @type {import('dependency-cruiser').IConfiguration}
 */
export default {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment:
        'Files in src/ import each other one way. Type-only imports count: two files that need each ' +
        "other's types are one room split in two, or a shared shape that belongs in a module below both.",
      from: { path: '^src/' },
      to: { circular: true },
    },
    {
      name: 'cli-only-from-cli',
      severity: 'error',
      comment: 'cli/ is the top of the library: nothing else in src/ imports it (tests and scripts may).',
      from: { path: '^src/', pathNot: '^src/cli/' },
      to: { path: '^src/cli/' },
    },
    {
      name: 'metrics-not-recovery',
      severity: 'error',
      comment:
        'metrics/ records what maintenance tells it: recovery/ imports metrics/, never the other way round.',
      from: { path: '^src/metrics/' },
      to: { path: '^src/recovery/' },
    },
    {
      name: 'ui-reads-only-the-contract',
      severity: 'error',
      comment:
        "The dashboard UI runs in a browser: of the server's code it imports only the API's types " +
        '(src/dashboard/contract.ts).',
      from: { path: '^src/dashboard/ui/src/' },
      to: { path: '^src/', pathNot: ['^src/dashboard/ui/src/', '^src/dashboard/contract[.]ts$'] },
    },
    {
      name: 'contract-reaches-no-server-code',
      severity: 'error',
      comment:
        'The contract, and the two modules whose types it names, import nothing else of src/: the UI ' +
        'typechecks every module they reach, with browser settings.',
      from: { path: '^src/(dashboard/contract|workflow/dag|scheduler/ScheduleInfo)[.]ts$' },
      to: { path: '^src/', pathNot: '^src/(workflow/dag|scheduler/ScheduleInfo)[.]ts$' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    // Type-only imports are dependencies too (see no-circular).
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default', 'types'],
    },
  },
};
