/**
 * docs/configuration.md lists every key the code accepts, and no other: the 00-multus.conf keys (MULTUS_KEYS, the
 * list the thin parser folds keys against), the daemon-config.json keys (the keys parseDaemonConfig reads from the
 * decoded object, found in its source, since it reads them one by one) and the `multus install` options (FLAGS).
 * A key added to the code without a row in the reference, or a row the code does not accept, fails here.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { FLAGS } from '../../src/install/options.ts';
import { MULTUS_KEYS } from '../../src/multus/conf.ts';

const root = new URL('../../', import.meta.url);
const doc = readFileSync(new URL('docs/configuration.md', root), 'utf8');

/** The backquoted names in the first cell of each table row under the `## <heading>` section. */
function documentedKeys(heading: string): string[] {
  const start = doc.indexOf(`\n## ${heading}\n`);
  if (start < 0) throw new Error(`docs/configuration.md has no section "## ${heading}"`);
  const end = doc.indexOf('\n## ', start + 1);
  const section = doc.slice(start, end < 0 ? undefined : end);
  const keys: string[] = [];
  for (const line of section.split('\n')) {
    const cell = /^\| ([^|]+) \|/.exec(line)?.[1];
    if (cell === undefined || cell === 'key' || cell === 'option') continue;
    for (const m of cell.matchAll(/`([^`]+)`/g)) keys.push(m[1]!);
  }
  return keys.sort();
}

/** The keys src/daemon/config.ts reads from its decoded object `raw`: `helper(raw, 'key', ...)` and `raw.key`. */
function daemonKeys(): string[] {
  const source = readFileSync(new URL('src/daemon/config.ts', root), 'utf8');
  const keys = new Set<string>();
  for (const m of source.matchAll(/\(raw, '([A-Za-z]\w*)'/g)) keys.add(m[1]!);
  for (const m of source.matchAll(/\braw\.([A-Za-z]\w*)/g)) keys.add(m[1]!);
  return [...keys].sort();
}

describe('docs/configuration.md against the code', () => {
  it('00-multus.conf: a row for each key of MULTUS_KEYS, and no other', () => {
    expect(documentedKeys('00-multus.conf')).toEqual([...MULTUS_KEYS].sort());
  });

  it('daemon-config.json: a row for each key parseDaemonConfig reads, and no other', () => {
    const keys = daemonKeys();
    expect(keys.length).toBeGreaterThan(20); // the scan found the reads, not nothing
    expect(documentedKeys('daemon-config.json')).toEqual(keys);
  });

  it('multus install: a row for each option of FLAGS, hidden ones included, and no other', () => {
    expect(documentedKeys('multus install')).toEqual(
      Object.keys(FLAGS)
        .map((name) => `--${name}`)
        .sort(),
    );
  });
});
