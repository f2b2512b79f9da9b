/**
 * build/multus under the name `kubectl-multus` (argv[0], a symbolic link as `ln -s` on a PATH makes it) is the
 * kubectl plugin, served from the roles' bundle (docs/kubectl-multus.md): `validate -f` on the table of
 * test/data/kubectl-multus/ (YAML with several documents: js-yaml from the embedded fallback bundle) exits 1 with
 * ADD's messages; `multus preflight` and `multus webhook` reach their commands.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { fileExists, needs } from '../helpers/skip.ts';

const REPO = join(import.meta.dirname, '..', '..');
const TS = process.env.MULTUS_TS_BIN || join(REPO, 'build', 'multus');
const DATA = join(REPO, 'test/data/kubectl-multus');
const built = needs(fileExists(TS, 'the built executable (npm run build)'));

const dir = mkdtempSync(join(tmpdir(), 'multus-kubectl-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const run = (program: string, args: string[]) =>
  spawnSync(program, args, { encoding: 'utf8', timeout: 60_000, env: { PATH: '/usr/bin:/bin', HOME: dir } });

describe.skipIf(!built)('the executable as kubectl-multus', () => {
  it("validate -f: exit 1, each bad object with ADD's message; exit 0 for good files", () => {
    const plugin = join(dir, 'kubectl-multus');
    symlinkSync(TS, plugin);
    const bad = run(plugin, ['validate', '-f', join(DATA, 'nads.yaml'), '-f', join(DATA, 'pods.yaml')]);
    expect(bad.stderr).toBe('');
    expect(bad.status).toBe(1);
    expect(bad.stdout).toContain(
      "error  NetworkAttachmentDefinition ns1/no-type: delegate must have the 'type' or 'plugins' field",
    );
    expect(bad.stdout).toContain(
      'error  pod ns1/two-default-routes: error loading k8s delegates: "default-route" is set on both',
    );
    expect(bad.stdout).toMatch(/10 objects, 7 bad\n$/);
    const good = run(plugin, ['validate', '-f', join(DATA, 'good.yaml')]);
    expect(good.status).toBe(0);
  });

  it('multus preflight and multus webhook are their commands (usage errors exit 2)', () => {
    const preflight = run(TS, ['preflight', '--bogus']);
    expect(preflight.stderr).toMatch(/kubectl multus preflight: unknown flag "--bogus"/);
    expect(preflight.status).toBe(2);
    const webhook = run(TS, ['webhook']);
    expect(webhook.stderr).toMatch(/--tls-cert-file and --tls-private-key-file are required/);
    expect(webhook.status).toBe(2);
  });
});
