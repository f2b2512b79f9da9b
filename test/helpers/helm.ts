/**
 * helm v3.22.0 as the tests run it (test/peers/build-go-tool.sh helm builds it into the cache) and the chart's path:
 * a HOME and XDG dirs of its own, so no repository or cache of the machine's is read.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import yaml from 'js-yaml';
import { expect } from 'vitest';

const REPO = join(import.meta.dirname, '..', '..');
export const HELM = join(process.env.MULTUS_TS_CACHE_DIR || join(REPO, '.cache'), 'helm', 'helm');
export const CHART = join(REPO, 'deployments', 'helm', 'multus');

/** The environment of one helm run: PATH and a fresh HOME. */
export function helmEnv(): Record<string, string> {
  const home = mkdtempSync(join(tmpdir(), 'mts-helm-home-'));
  return { PATH: '/usr/bin:/bin', HOME: home, XDG_CACHE_HOME: join(home, 'cache'), XDG_CONFIG_HOME: join(home, 'cfg') };
}

/** One helm run with its own HOME. */
export function helm(args: string[]): { code: number | null; stdout: string; stderr: string } {
  const env = helmEnv();
  const r = spawnSync(HELM, args, { encoding: 'utf8', timeout: 60_000, env });
  rmSync(env.HOME!, { recursive: true, force: true });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

export interface Obj {
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  [k: string]: any;
}

/** `helm template` of the chart in kube-system with `--set` values (and extra arguments), the objects parsed. */
export function render(...set: string[]): Obj[] {
  return renderArgs(set.flatMap((s) => ['--set', s]));
}

export function renderArgs(args: string[]): Obj[] {
  const r = helm(['template', 'multus', CHART, '--namespace', 'kube-system', ...args]);
  expect(r.code, r.stderr).toBe(0);
  return yaml.loadAll(r.stdout).filter((d): d is Obj => d !== null && d !== undefined);
}

/** A values file of `values` (YAML) for `-f`, and its cleanup. */
export function valuesFile(values: unknown): { path: string; remove(): void } {
  const dir = mkdtempSync(join(tmpdir(), 'mts-helm-values-'));
  const path = join(dir, 'values.yaml');
  writeFileSync(path, yaml.dump(values));
  return { path, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** The one object of that kind (and name). */
export const one = (objs: Obj[], kind: string, name?: string): Obj => {
  const found = objs.filter((o) => o.kind === kind && (name === undefined || o.metadata.name === name));
  expect(
    found.map((o) => `${o.kind}/${o.metadata.name}`),
    `${kind} ${name ?? ''}`,
  ).toHaveLength(1);
  return found[0]!;
};
