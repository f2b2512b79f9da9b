#!/usr/bin/env node
/**
 * The rooms of src/ and their one-way arrows (docs/design.md): a file may import from its own room or from a
 * lower one, never from a higher one. Ranks: base < store < cni < k8s < devices = routes < multus < host <
 * the process edges (cli.ts, daemon/, install/). Rooms of equal rank (devices, routes) may not import each other.
 * Reads every import/export-from/import() with a relative specifier; prints each wrong-way import and exits 1.
 *
 *   node scripts/check-rooms.mjs            # run by `npm run check`
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const SRC = join(ROOT, 'src');

/** @type {Record<string, number>} */
const RANK = { base: 0, store: 1, cni: 2, k8s: 3, devices: 4, routes: 4, multus: 5, host: 6, edge: 7 };

/** The room of a path relative to src/: its first folder, or `edge` for files at the top (cli.ts). */
function roomOf(/** @type {string} */ rel) {
  const first = rel.split('/')[0] ?? '';
  if (!rel.includes('/')) return 'edge';
  return first === 'daemon' || first === 'install' ? 'edge' : first;
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
for (const file of walk(SRC)) {
  const rel = relative(SRC, file);
  const room = roomOf(rel);
  const text = readFileSync(file, 'utf8');
  for (const match of text.matchAll(IMPORT)) {
    const target = relative(SRC, resolve(dirname(file), match[1] ?? ''));
    if (target.startsWith('..')) continue;
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
if (problems.length > 0) {
  for (const line of problems) console.error(`check-rooms: ${line}`);
  process.exit(1);
}
console.log('check-rooms: every import in src/ points to its own room or a lower one');
