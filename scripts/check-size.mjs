#!/usr/bin/env node
/**
 * The size rules of src/ (docs/design.md, "Checks"): no file over 400 lines, no function over 80 lines.
 *
 * A function is any function declaration, method, accessor, constructor, function expression or arrow function;
 * its length runs from the line of its first token (its name, `async`, or the parameter list) to the line of its
 * closing brace, as an editor shows it. Files are parsed with TypeScript's parser only (no type check), so this
 * costs a fraction of a second. Prints each file and function over its limit and exits 1.
 *
 *   node scripts/check-size.mjs            # run by `npm run check`
 *   node scripts/check-size.mjs DIR        # another tree (test/unit/scripts/check-size.test.ts)
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const SRC = process.argv[2] ? resolve(process.argv[2]) : join(ROOT, 'src');
const MAX_FILE_LINES = 400;
const MAX_FUNCTION_LINES = 80;

/** Folders of generated code (src/kubelet/gen/): written by a script, read by nobody, so not held to the rules. */
const GENERATED = 'gen';

/** @returns {string[]} */
function walk(/** @type {string} */ dir) {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return name === GENERATED ? [] : walk(path);
    return /\.(ts|mts)$/.test(name) ? [path] : [];
  });
}

/** The name a reader would search for: the declaration's, or the variable or property it is assigned to. */
function nameOf(/** @type {ts.Node} */ node, /** @type {ts.SourceFile} */ file) {
  const named = /** @type {{ name?: ts.Node }} */ (node).name;
  if (named) return named.getText(file);
  const parent = node.parent;
  if (
    parent &&
    (ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent) || ts.isPropertyDeclaration(parent))
  )
    return parent.name.getText(file);
  return ts.isConstructorDeclaration(node) ? 'constructor' : '(anonymous)';
}

const problems = [];
for (const path of walk(SRC)) {
  const text = readFileSync(path, 'utf8');
  const rel = relative(SRC, path);
  const lines = text.split('\n').length - (text.endsWith('\n') ? 1 : 0);
  if (lines > MAX_FILE_LINES) problems.push(`${rel}: ${lines} lines (at most ${MAX_FILE_LINES})`);
  const file = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const visit = (/** @type {ts.Node} */ node) => {
    if (ts.isFunctionLike(node) && /** @type {{ body?: ts.Node }} */ (node).body) {
      const first = file.getLineAndCharacterOfPosition(node.getStart(file)).line;
      const last = file.getLineAndCharacterOfPosition(node.getEnd()).line;
      const length = last - first + 1;
      if (length > MAX_FUNCTION_LINES) {
        problems.push(`${rel}:${first + 1}: ${nameOf(node, file)} is ${length} lines (at most ${MAX_FUNCTION_LINES})`);
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(file);
}

for (const p of problems) process.stderr.write(`check-size: ${p}\n`);
if (problems.length > 0) process.exit(1);
process.stdout.write(
  `check-size: no file in src/ over ${MAX_FILE_LINES} lines, no function over ${MAX_FUNCTION_LINES} lines\n`,
);
