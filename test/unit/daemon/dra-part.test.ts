/**
 * daemon/dra-part.ts: the DRA plugin component of the daemon. Off without `draNetworks` (no socket, no client);
 * on, it serves the registration and DRAPlugin sockets under `kubeletDir` with the settings of the daemon config
 * (driver name, checkpoints under `<cniDir>/dra`, the node from MULTUS_NODE_NAME), and the daemon's signal removes
 * both; on without any Kubernetes API it refuses to start, saying why. The API server here is unreachable: the
 * slice sync only logs and retries.
 */
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../../src/base/log.ts';
import { parseDaemonConfig } from '../../../src/daemon/config.ts';
import { draPlugin, draSettings } from '../../../src/daemon/dra-part.ts';
import type { Shared } from '../../../src/daemon/parts.ts';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'mts-dra-part-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

function shared(keys: Record<string, unknown>, env: Record<string, string> = { MULTUS_NODE_NAME: 'node-9' }): Shared {
  const cfg = parseDaemonConfig(
    JSON.stringify({ kubeletDir: join(dir, 'kubelet'), cniDir: join(dir, 'cni'), ...keys }),
  );
  return { cfg, io: { env, writeStderr: () => {} }, log: silentLogger } as unknown as Shared;
}

function kubeconfig(): string {
  const file = join(dir, 'kubeconfig');
  writeFileSync(
    file,
    [
      'apiVersion: v1',
      'kind: Config',
      'clusters: [{name: c, cluster: {server: "https://127.0.0.1:9"}}]',
      'users: [{name: u, user: {token: "t"}}]',
      'contexts: [{name: x, context: {cluster: c, user: u}}]',
      'current-context: x',
      '',
    ].join('\n'),
    { mode: 0o600 },
  );
  return file;
}

const sockets = (driver: string) => [
  join(dir, 'kubelet', 'plugins_registry', `${driver}-reg.sock`),
  join(dir, 'kubelet', 'plugins', driver, 'dra.sock'),
];

describe('the DRA plugin component', () => {
  it('takes its settings from the daemon config and the environment', () => {
    const s = shared({ draNetworks: true, draDriverName: 'nets.example.com', draMaxNetworkDevices: 7 });
    expect(draSettings(s)).toEqual({
      driver: 'nets.example.com',
      kubeletDir: join(dir, 'kubelet'),
      checkpointDir: join(dir, 'cni', 'dra'),
      allowInlineFromClaim: false,
      maxDevices: 7,
      nodeName: 'node-9',
    });
  });

  it('does nothing without draNetworks', async () => {
    const part = draPlugin(shared({ kubeconfig: kubeconfig() }));
    await part.start(new AbortController().signal);
    await part.stop(undefined);
    expect(existsSync(join(dir, 'kubelet'))).toBe(false);
  });

  it('serves both sockets with draNetworks, until the daemon signal aborts', async () => {
    const part = draPlugin(shared({ draNetworks: true, kubeconfig: kubeconfig() }));
    const daemon = new AbortController();
    await part.start(daemon.signal);
    expect(sockets('multus.k8s.cni.cncf.io').map(existsSync)).toEqual([true, true]);
    daemon.abort();
    await part.stop({ reason: 'SIGTERM', again: new Promise(() => {}) });
    expect(sockets('multus.k8s.cni.cncf.io').map(existsSync)).toEqual([false, false]);
  });

  it('refuses to start with draNetworks and no Kubernetes API', async () => {
    const part = draPlugin(shared({ draNetworks: true }, {}));
    await expect(part.start(new AbortController().signal)).rejects.toThrow(
      'draNetworks is true but there is no Kubernetes API (set kubeconfig, or run in-cluster)',
    );
  });
});
