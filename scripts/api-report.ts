/**
 * The API report: `npm run api:check` compares the package's exported surface with etc/horsies.api.md and fails
 * (one line, then the difference) when they differ; `npm run api:update` (`--update`) rewrites the report.
 *
 * It emits the declarations of src/ (tsconfig.build.json) into a temporary folder, so neither dist/ nor a build is
 * needed, and runs API Extractor (api-extractor.json) on their index.d.ts, with the TypeScript it bundles (6.0,
 * the repository's own major). A change of the report is a change of the public API: review it as one, and name a
 * breaking change in CHANGELOG.md.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Extractor, ExtractorConfig } from '@microsoft/api-extractor';

const update = process.argv.includes('--update');
const root = resolve(import.meta.dirname, '..');
const report = join(root, 'etc', 'horsies.api.md');
const work = mkdtempSync(join(tmpdir(), 'horsies-api-'));
try {
  const dts = join(work, 'dts');
  mkdirSync(join(work, 'report'));
  execFileSync(
    process.execPath,
    [
      join(root, 'node_modules', 'typescript', 'bin', 'tsc'),
      ...['-p', join(root, 'tsconfig.build.json'), '--outDir', dts, '--emitDeclarationOnly'],
      ...['--declarationMap', 'false', '--sourceMap', 'false', '--inlineSources', 'false'],
    ],
    { stdio: 'inherit' },
  );
  const configPath = join(root, 'api-extractor.json');
  const configObject = ExtractorConfig.loadFile(configPath);
  configObject.mainEntryPointFilePath = join(dts, 'index.d.ts');
  // Written to the temporary folder, then compared here: the report names a few declarations by their path, which
  // becomes dist/ before the comparison, so the report is the same wherever it is made.
  configObject.apiReport = {
    ...configObject.apiReport!,
    reportFolder: join(work, 'report'),
    reportTempFolder: join(work, 'temp'),
  };
  // The declarations alone, outside the repository's tsconfig (which would pull src/ into the analysis).
  configObject.compiler = {
    overrideTsconfig: {
      compilerOptions: {
        target: 'ES2022',
        module: 'NodeNext',
        moduleResolution: 'NodeNext',
        lib: ['ES2023'],
        types: ['node'],
        strict: true,
        skipLibCheck: true,
      },
      files: [configObject.mainEntryPointFilePath],
    },
  };
  const config = ExtractorConfig.prepare({
    configObject,
    configObjectFullPath: configPath,
    packageJsonFullPath: join(root, 'package.json'),
  });
  const result = Extractor.invoke(config, {
    localBuild: true,
    messageCallback: (message) => {
      if (message.messageId.startsWith('console-api-report')) message.handled = true;
    },
  });
  if (!result.succeeded) {
    process.exitCode = 1;
  } else {
    const made = readFileSync(join(work, 'report', 'horsies.api.md'), 'utf8').replaceAll(`${dts}/`, 'dist/');
    const committed = existsSync(report) ? readFileSync(report, 'utf8') : '';
    if (update) {
      writeFileSync(report, made);
      console.log(`api: ${report} ${made === committed ? 'unchanged' : 'updated'}`);
    } else if (made !== committed) {
      console.error(
        'api: the exported surface differs from etc/horsies.api.md: run `npm run api:update` and commit the report',
      );
      writeFileSync(join(work, 'horsies.api.md'), made);
      try {
        execFileSync('diff', ['-u', report, join(work, 'horsies.api.md')], { stdio: 'inherit' });
      } catch {
        // diff exits 1 when the files differ: that is the point.
      }
      process.exitCode = 1;
    }
  }
} finally {
  rmSync(work, { recursive: true, force: true });
}
