/**
 * The compiled executable's daemon with `draNetworks: true` (build/multus, root): it serves the kubelet DRA plugin
 * from its embedded gRPC bundle (kubelet-grpc.cjs). A grpc-js client that @grpc/proto-loader builds from the
 * kubelet's own .proto files asks GetInfo on `<kubeletDir>/plugins_registry/<driver>-reg.sock`, then prepares a
 * claim on the endpoint it names: with the API server unreachable, the claim gets an error of its own saying the
 * kubelet tries again; unprepare of a claim never prepared is success, twice. SIGTERM removes both sockets.
 */
import type { ChildProcess } from 'node:child_process';
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { call, draClient, registrationClient } from '../helpers/dra-client.ts';
import { fileExists, isRoot, needs } from '../helpers/skip.ts';

const EXE = resolve('build/multus');
const DRIVER = 'multus.k8s.cni.cncf.io';
const ready = () => needs(isRoot(), fileExists(EXE, 'the built executable (npm run build)'));

let dir: string;
let child: ChildProcess | undefined;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'mts-daemon-dra-'));
  mkdirSync(join(dir, 'net.d'));
});
afterEach(() => {
  if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

async function until(cond: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 1500 && !cond(); i++) await new Promise((r) => setTimeout(r, 10));
  if (!cond()) throw new Error(`timed out waiting for ${what}`);
}

describe.runIf(ready())('multus daemon with draNetworks (process)', () => {
  it('registers and serves the DRA plugin over its sockets; SIGTERM removes them', async () => {
    const kubeconfig = join(dir, 'kubeconfig');
    writeFileSync(
      kubeconfig,
      'apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: "https://127.0.0.1:9"}}]\n' +
        'users: [{name: u, user: {token: "t"}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n',
      { mode: 0o600 },
    );
    const config = {
      socketDir: join(dir, 'run'),
      cniConfigDir: join(dir, 'net.d'),
      shutdownDrainSeconds: 0,
      kubeconfig,
      draNetworks: true,
      kubeletDir: join(dir, 'kubelet'),
      cniDir: join(dir, 'cni'),
    };
    writeFileSync(join(dir, 'daemon-config.json'), JSON.stringify(config));
    const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', MULTUS_NODE_NAME: 'node-1' };
    const c = spawn(EXE, ['daemon', '--config', join(dir, 'daemon-config.json')], { env, stdio: 'ignore' });
    child = c;
    const reg = join(dir, 'kubelet', 'plugins_registry', `${DRIVER}-reg.sock`);
    await until(() => existsSync(reg), 'the registration socket');
    const registration = registrationClient(reg);
    const info = await call(registration, 'GetInfo', {});
    expect(info).toEqual({
      type: 'DRAPlugin',
      name: DRIVER,
      endpoint: join(dir, 'kubelet', 'plugins', DRIVER, 'dra.sock'),
      supported_versions: ['v1.DRAPlugin', 'v1beta1.DRAPlugin'],
    });
    const dra = draClient(info.endpoint as string);
    const claims = [{ namespace: 'ns1', name: 'c1', uid: '0c0c0c0c-0000-4000-8000-000000000001' }];
    const prepared = (await call(dra, 'NodePrepareResources', { claims })).claims as Record<string, { error: string }>;
    expect(prepared[claims[0]!.uid]!.error).toMatch(
      /^cannot read ResourceClaim ns1\/c1: .*\(the kubelet tries again\)$/,
    );
    const none = { claims: { [claims[0]!.uid]: { error: '' } } };
    expect(await call(dra, 'NodeUnprepareResources', { claims })).toEqual(none);
    expect(await call(dra, 'NodeUnprepareResources', { claims })).toEqual(none);
    registration.close();
    dra.close();
    const exited = new Promise<number | null>((r) => c.on('exit', r));
    c.kill('SIGTERM');
    expect(await exited).toBe(0);
    expect(existsSync(reg)).toBe(false);
    expect(existsSync(info.endpoint as string)).toBe(false);
  }, 30_000);
});
