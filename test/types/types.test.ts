/**
 * The type expectations of `appTypes.ts` are real: the file compiles as it is (no `@ts-expect-error` unused), and
 * with the directives removed each marked line fails to compile, with an error that names what its note says.
 */
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');
const FILE = join(ROOT, 'test/types/appTypes.ts');

function compilerOptions(): ts.CompilerOptions {
  const config = ts.readConfigFile(join(ROOT, 'tsconfig.json'), (p) => ts.sys.readFile(p));
  return ts.parseJsonConfigFileContent(config.config, ts.sys, ROOT).options;
}

let previous: ts.Program | undefined;

/** Diagnostics of `appTypes.ts`, compiled as it is or, when `text` is given, with that text in its place. */
function diagnostics(text?: string): ts.Diagnostic[] {
  const options = { ...compilerOptions(), noEmit: true };
  const host = ts.createCompilerHost(options);
  const read = host.getSourceFile.bind(host);
  host.getSourceFile = (name, language, onError, fresh) =>
    text !== undefined && resolve(name) === FILE
      ? ts.createSourceFile(name, text, language)
      : read(name, language, onError, fresh);
  // The second compile reuses the first one's unchanged files (src/, zod).
  const program = ts.createProgram([FILE], options, host, previous);
  previous = program;
  const file = program.getSourceFile(FILE);
  // Only this file's diagnostics: checking all of src/ again would take far longer.
  return [...program.getSyntacticDiagnostics(file), ...program.getSemanticDiagnostics(file)];
}

describe('app and task types', () => {
  it('appTypes.ts compiles, every @ts-expect-error used', () => {
    const found = diagnostics();
    expect(found.map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'))).toEqual([]);
  });

  it('each @ts-expect-error marks an error about what its note names', () => {
    const source = readFileSync(FILE, 'utf8');
    const lines = source.split('\n');
    const marked = lines.flatMap((line, index) => {
      const note = /\/\/ @ts-expect-error (\w+):/.exec(line);
      return note ? [{ line: index + 1, topic: note[1] as string }] : [];
    });
    expect(marked.length).toBeGreaterThanOrEqual(8);
    // The directives become plain comments, in memory only.
    const found = diagnostics(source.replaceAll('// @ts-expect-error', '// expected:'));
    {
      for (const { line, topic } of marked) {
        const onNext = found.filter((d) => d.file && d.start !== undefined && lineOf(d) === line + 1);
        expect(onNext, `line ${line + 1} (${topic}) compiles without its directive`).not.toHaveLength(0);
        const text = onNext.map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n')).join('\n');
        const about: Record<string, RegExp> = {
          queue: /"nope"|"elsewhere"|"emails"/,
          code: /"NOT_DECLARED"/,
          handler: /OTHER_CODE.*not listed in the task's errors/s,
          errorCodes: /"OTHER_CODE"/,
          signal: /boolean|payloadInput|WaitNode/,
        };
        expect(text).toMatch(about[topic] ?? /$^/);
      }
      // Nothing else fails: every error sits on a marked line.
      const markedLines = new Set(marked.map((m) => m.line + 1));
      expect(found.filter((d) => !markedLines.has(lineOf(d)))).toEqual([]);
    }
  });
});

function lineOf(d: ts.Diagnostic): number {
  return d.file && d.start !== undefined ? d.file.getLineAndCharacterOfPosition(d.start).line + 1 : -1;
}
