/**
 * Checks the dependency rules of `.dependency-cruiser.mjs` over src/ (`npm run lint` runs it after ESLint):
 * silent when they hold; otherwise one line per violation, `rule: from → to` (a cycle as its whole path), and
 * exit code 1. `npx depcruise src --config` gives the same verdict in dependency-cruiser's own words.
 */
import { cruise } from 'dependency-cruiser';
import type { ICruiseResult, IViolation } from 'dependency-cruiser';
import extractDepcruiseOptions from 'dependency-cruiser/config-utl/extract-depcruise-options';
import extractTSConfig from 'dependency-cruiser/config-utl/extract-ts-config';

const options = await extractDepcruiseOptions('./.dependency-cruiser.mjs');
const tsConfigFile = options.tsConfig?.fileName;
const tsConfig = tsConfigFile ? extractTSConfig(tsConfigFile) : undefined;
const { output } = await cruise(['src'], { ...options, outputType: 'json' }, {}, { tsConfig });
const result: ICruiseResult = typeof output === 'string' ? JSON.parse(output) : output;

function line(v: IViolation): string {
  const path = v.cycle
    ? [v.from, ...v.cycle.map((d) => d.name)]
    : v.via
      ? [v.from, ...v.via.map((d) => d.name)]
      : [v.from, v.to];
  return `${v.rule.name}: ${path.join(' → ')}`;
}

const violations = result.summary.violations.filter((v) => v.rule.severity !== 'ignore');
for (const v of violations) console.log(line(v));
if (result.summary.error > 0) process.exitCode = 1;
