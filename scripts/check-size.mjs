#!/usr/bin/env node
/**
 * The size rules (docs/design.md, "Checks"): no file over 400 lines in src/ or scripts/, no function over 80 lines
 * in src/. A folder named `gen/` (generated code) is left out.
 *
 * A function is any function declaration, method, accessor, constructor, function expression or arrow function;
 * its length runs from the line of its first token (its name, `async`, or the parameter list) to the line of its
 * closing brace, as an editor shows it. Files are parsed with TypeScript's parser only (no type check), so this
 * costs a fraction of a second. Prints each file and function over its limit and exits 1.
 *
 *   node scripts/check-size.mjs            # run by `npm run check`
 *   node scripts/check-size.mjs DIR        # DIR/src and DIR/scripts instead (test/unit/scripts/check-size.test.ts)
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const ROOT = process.argv[2] ? resolve(process.argv[2]) : resolve(dirname(fileURLToPath(import.meta.url)), '..');
const MAX_FILE_LINES = 400;
const MAX_FUNCTION_LINES = 80;
/** The trees checked, and whether their functions are too (scripts/ has a long `main` in demo.mjs). */
const TREES = [
  { dir: 'src', functions: true },
  { dir: 'scripts', functions: false },
];
const CODE = /\.(ts|mts|cts|js|mjs|cjs)$/;

/** @returns {string[]} */
function walk(/** @type {string} */ dir) {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return name === 'gen' ? [] : walk(path);
    return CODE.test(name) ? [path] : [];
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

/** Each function of `text` over MAX_FUNCTION_LINES, as a problem line. */
function longFunctions(/** @type {string} */ path, /** @type {string} */ text, /** @type {string} */ rel) {
  const problems = [];
  const kind = /\.[mc]?js$/.test(path) ? ts.ScriptKind.JS : ts.ScriptKind.TS;
  const file = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true, kind);
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
  return problems;
}

const problems = [];
for (const tree of TREES) {
  if (!existsSync(join(ROOT, tree.dir))) continue;
  for (const path of walk(join(ROOT, tree.dir))) {
    const text = readFileSync(path, 'utf8');
    const rel = relative(ROOT, path);
    const lines = text.split('\n').length - (text.endsWith('\n') ? 1 : 0);
    if (lines > MAX_FILE_LINES) problems.push(`${rel}: ${lines} lines (at most ${MAX_FILE_LINES})`);
    if (tree.functions) problems.push(...longFunctions(path, text, rel));
  }
}

for (const p of problems) process.stderr.write(`check-size: ${p}\n`);
if (problems.length > 0) process.exit(1);
process.stdout.write(
  `check-size: no file in src/ or scripts/ over ${MAX_FILE_LINES} lines, no function in src/ over ${MAX_FUNCTION_LINES} lines\n`,
);
