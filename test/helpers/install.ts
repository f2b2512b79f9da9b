/**
 * Helpers for test/install: a node's directories in a temp dir (CNI conf and bin dirs, a mounted service
 * account, an image's /usr/src/multus-cni/bin) and `runScripted`, which runs `runInstall` in-process with one
 * scripted action per one-second tick (no real time: the installer stops when the script ends).
 */
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { onTestFinished } from 'vitest';
import { type InstallDeps, runInstall } from '../../src/install/install.ts';
import { parseInstallArgs } from '../../src/install/options.ts';

export interface Node {
  root: string;
  netd: string;
  bin: string;
  sa: string;
  src: string;
  mnetd: string;
  /** the options that point the installer at this node */
  args: string[];
}

export const ENV = { KUBERNETES_SERVICE_HOST: '10.96.0.1', KUBERNETES_SERVICE_PORT: '443' };

export function makeNode(): Node {
  const root = mkdtempSync(join(tmpdir(), 'multus-install-'));
  onTestFinished(() => rmSync(root, { recursive: true, force: true }));
  const n = {
    root,
    netd: join(root, 'net.d'),
    bin: join(root, 'bin'),
    sa: join(root, 'sa'),
    src: join(root, 'src'),
    mnetd: join(root, 'multus-net.d'),
  };
  for (const d of [n.netd, n.bin, n.sa, n.src]) mkdirSync(d);
  writeFileSync(join(n.sa, 'token'), 'token-1');
  writeFileSync(join(n.sa, 'ca.crt'), '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n');
  writeFileSync(join(n.src, 'multus'), 'multus-binary');
  const args = [
    `--cni-bin-dir=${n.bin}`,
    `--cni-conf-dir=${n.netd}`,
    `--multus-autoconfig-dir=${n.netd}`,
    `--multus-bin-file=${join(n.src, 'multus')}`,
    `--multus-cni-conf-dir=${n.mnetd}`,
    `--service-account-dir=${n.sa}`,
  ];
  return { ...n, args };
}

export const FLANNEL = JSON.stringify({
  cniVersion: '1.0.0',
  name: 'cbr0',
  plugins: [
    { type: 'flannel', delegate: { hairpinMode: true, isDefaultGateway: true } },
    { type: 'portmap', capabilities: { portMappings: true } },
  ],
});
export const BRIDGE_031 = JSON.stringify({
  cniVersion: '0.3.1',
  name: 'br',
  type: 'bridge',
  bridge: 'cni0',
  capabilities: { bandwidth: true },
  ipam: { type: 'host-local', subnet: '10.1.0.0/16' },
});

export interface Run {
  logs: string[];
  error: Error | null;
}

/**
 * Runs `multus install <args>` with `ticks[i]` done at the i-th tick; stops after the last one (as SIGTERM).
 * `onTick` is called after each tick's action and after the installer's reaction to the previous tick, so a
 * tick can assert what the previous one caused.
 */
export async function runScripted(
  args: string[],
  ticks: Array<() => void | Promise<void>>,
  execPath = '/nonexistent/multus',
  deps: Partial<
    Pick<InstallDeps, 'env' | 'now' | 'requestNodeToken' | 'warnNode' | 'deletionState' | 'deleteDraSlices'>
  > = {},
): Promise<Run> {
  const logs: string[] = [];
  let stopped = false;
  let error: Error | null = null;
  const script = [...ticks];
  try {
    await runInstall(parseInstallArgs(args), {
      env: ENV,
      execPath,
      ...deps,
      log: (l) => logs.push(l),
      stopped: () => stopped,
      async sleep() {
        const next = script.shift();
        if (!next) {
          stopped = true;
          return true;
        }
        await next();
        return false;
      },
    });
  } catch (e) {
    error = e as Error;
  }
  return { logs, error };
}

/** Names in a dir, sorted (to check that nothing half-written is left). */
export function ls(dir: string): string[] {
  return readdirSync(dir).sort();
}
