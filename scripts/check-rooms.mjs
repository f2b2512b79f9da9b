#!/usr/bin/env node
/**
 * The rooms of src/ and their one-way arrows (docs/design.md), and no import circles between files.
 *
 * Arrows: a file may import from its own room or from a lower one, never from a higher one. Ranks: base < cni < k8s <
 * kubelet < devices = routes < multus < dra < host < hotplug = informers < daemon = install = operator < the process edge (the files
 * at the top: cli.ts, roles.ts, load-roles.ts). Rooms of equal rank (devices and routes; hotplug and informers;
 * daemon, install and operator) may not import each other.
 * Circles: no file may reach itself through imports (type-only imports included: a circle of types is a circle of
 * meaning a reader walks round), inside a room as well as across rooms.
 * Reads every import/export-from/import() with a relative specifier; prints each wrong-way import and each circle
 * and exits 1.
 *
 *   node scripts/check-rooms.mjs            # run by `npm run check`
 *   node scripts/check-rooms.mjs DIR        # another tree laid out as src/ (test/unit/scripts/check-rooms.test.ts)
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const SRC = process.argv[2] ? resolve(process.argv[2]) : join(ROOT, 'src');

/** @type {Record<string, number>} */
const RANK = {
  base: 0,
  cni: 1,
  k8s: 2,
  kubelet: 3,
  devices: 4,
  routes: 4,
  multus: 5,
  dra: 6,
  host: 7,
  hotplug: 8,
  informers: 8,
  daemon: 9,
  install: 9,
  operator: 9,
  edge: 10,
};

/** The room of a path relative to src/: its first folder, or `edge` for files at the top (cli.ts). */
function roomOf(/** @type {string} */ rel) {
  if (!rel.includes('/')) return 'edge';
  return rel.split('/')[0] ?? '';
}

/** @returns {string[]} */
function walk(/** @type {string} */ dir) {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return walk(path);
    return /\.(ts|mts|mjs)$/.test(name) ? [path] : [];
  });
}

const IMPORT = /(?:\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)['"](\.{1,2}\/[^'"]+)['"]/g;

const problems = [];
/** @type {Map<string, string[]>} each file (relative to src/) and the files it imports */
const graph = new Map();
for (const file of walk(SRC)) {
  const rel = relative(SRC, file);
  const room = roomOf(rel);
  const text = readFileSync(file, 'utf8');
  /** @type {string[]} */
  const edges = [];
  graph.set(rel, edges);
  for (const match of text.matchAll(IMPORT)) {
    const path = resolve(dirname(file), match[1] ?? '');
    const target = relative(SRC, path);
    if (target.startsWith('..')) continue;
    if (existsSync(path) && !edges.includes(target)) edges.push(target);
    const to = roomOf(target);
    if (to === room) continue;
    const from = RANK[room];
    const rank = RANK[to];
    if (from === undefined || rank === undefined) {
      problems.push(`${rel}: room "${from === undefined ? room : to}" has no rank: add it to scripts/check-rooms.mjs`);
    } else if (rank >= from) {
      problems.push(`${rel} (${room}) imports ${target} (${to}): a lower room must not import a higher or equal one`);
    }
  }
}

/**
 * The circles of the import graph: its strongly connected components of more than one file (or a file that
 * imports itself), each shown as one path round it (Tarjan's algorithm, then a walk inside the component).
 * @returns {string[][]}
 */
function circles(/** @type {Map<string, string[]>} */ g) {
  let index = 0;
  /** @type {Map<string, {index: number, low: number}>} */
  const seen = new Map();
  /** @type {string[]} */
  const stack = [];
  const onStack = new Set();
  /** @type {string[][]} */
  const found = [];
  const visit = (/** @type {string} */ v) => {
    seen.set(v, { index, low: index });
    index++;
    stack.push(v);
    onStack.add(v);
    for (const w of g.get(v) ?? []) {
      if (!seen.has(w)) {
        visit(w);
        seen.get(v).low = Math.min(seen.get(v).low, seen.get(w).low);
      } else if (onStack.has(w)) {
        seen.get(v).low = Math.min(seen.get(v).low, seen.get(w).index);
      }
    }
    if (seen.get(v).low !== seen.get(v).index) return;
    const component = new Set();
    let w;
    do {
      w = stack.pop();
      onStack.delete(w);
      component.add(w);
    } while (w !== v);
    if (component.size > 1 || (g.get(v) ?? []).includes(v)) found.push(pathRound(g, v, component));
  };
  for (const v of [...g.keys()].sort()) if (!seen.has(v)) visit(v);
  return found;
}

/** A shortest path from `start` back to itself inside `component` (breadth first). */
function pathRound(
  /** @type {Map<string, string[]>} */ g,
  /** @type {string} */ start,
  /** @type {Set<string>} */ component,
) {
  /** @type {Map<string, string>} */
  const parent = new Map();
  const queue = [start];
  while (queue.length > 0) {
    const v = queue.shift() ?? '';
    for (const w of g.get(v) ?? []) {
      if (!component.has(w)) continue;
      if (w === start) {
        const path = [v];
        while (path[0] !== start) path.unshift(parent.get(path[0]) ?? start);
        return [...path, start];
      }
      if (!parent.has(w)) {
        parent.set(w, v);
        queue.push(w);
      }
    }
  }
  return [start, start];
}

for (const circle of circles(graph)) {
  problems.push(`import circle: ${circle.join(' → ')}: move what both sides need into a file of its own`);
}
if (problems.length > 0) {
  for (const line of problems) console.error(`check-rooms: ${line}`);
  process.exit(1);
}
console.log(
  'check-rooms: every import in src/ points to its own room or a lower one, and no import goes round in a circle',
);
