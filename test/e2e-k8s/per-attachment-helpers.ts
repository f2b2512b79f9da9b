/**
 * Helpers for per-attachment.test.ts: the recorder test double installed into a world's bin dir, dual-stack
 * host-local ranges, default-route and result-cache readers, host veth lookup, tc/iptables readers, and the
 * "rolled back" check for an ADD that failed after delegates ran (bridges stay, as on a node).
 */
import { copyFile, chmod, readFile, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { expect } from 'vitest';
import {
  CLUSTER_NET,
  type DriverCommand,
  type DriverResult,
  type IpLink,
  type IpRoute,
  MULTUS_BIN,
  REPO_ROOT,
  ip,
  linkNames,
  listDir,
  netnsPath,
  readLinks,
  reservedIps,
  runDriver,
  runOk,
} from '../e2e/helpers.ts';
import { type K8sWorld, type Sandbox, networkStatus } from './world.ts';

export const RECORDER_SRC = join(REPO_ROOT, 'test/data/bin/recorder');

/** Copies the recorder into the world's bin dir (found through CNI_PATH); returns nothing, logs are per config. */
export async function installRecorder(kw: K8sWorld): Promise<void> {
  const dest = join(kw.w.binDir, 'recorder');
  await copyFile(RECORDER_SRC, dest);
  await chmod(dest, 0o755);
  // the recorder is CommonJS; the world's temp dir is outside any package scope, but say so anyway
  await writeFile(join(kw.w.binDir, 'package.json'), '{"type":"commonjs"}\n');
}

/** A recorder plugin entry for a conflist that logs to `<world dir>/<name>.log`. */
export function recorderPlugin(
  kw: K8sWorld,
  name: string,
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  return { type: 'recorder', recorder: { log: recorderLog(kw, name) }, ...extra };
}

/** Links build/multus as `<binDir>/passthru`: run under that name it is the passthru plugin. */
export async function installPassthru(kw: K8sWorld): Promise<void> {
  await symlink(MULTUS_BIN, join(kw.w.binDir, 'passthru'));
}

/** K8sWorld.driver with the runtime's capability args (as containerd sends portMappings and bandwidth). */
export function driverWithCaps(
  kw: K8sWorld,
  cmd: DriverCommand,
  conf: string,
  sb: Sandbox,
  capArgs: Record<string, unknown>,
): Promise<DriverResult> {
  return runDriver(cmd, {
    conf,
    netns: netnsPath(sb.netns),
    id: sb.containerId,
    ifname: 'eth0',
    args: kw.cniArgs(sb),
    cacheDir: kw.w.cacheDir,
    path: kw.w.path,
    hostNetns: kw.w.hostNs,
    capArgs,
  });
}

export const recorderLog = (kw: K8sWorld, name: string): string => join(kw.dir, `${name}.log`);

export interface RecorderLine {
  command: string;
  env: Record<string, string>;
  stdin: Record<string, any>;
}

export async function recorderLines(kw: K8sWorld, name: string, command?: string): Promise<RecorderLine[]> {
  let text = '';
  try {
    text = await readFile(recorderLog(kw, name), 'utf8');
  } catch {
    return [];
  }
  return text
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as RecorderLine)
    .filter((l) => command === undefined || l.command === command);
}

/** CNI_ARGS of a recorder line as [key, value] pairs. */
export const argPairs = (line: RecorderLine): [string, string][] =>
  (line.env.CNI_ARGS ?? '')
    .split(';')
    .filter(Boolean)
    .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]);

/** `fd00:<240+k>:<index>::/64`, the IPv6 twin of kw.subnet(k). */
export const subnet6 = (kw: K8sWorld, k: number): string => `fd00:${240 + k}:${kw.index}::/64`;
export const addr6 = (kw: K8sWorld, k: number, n: number): string => `fd00:${240 + k}:${kw.index}::${n.toString(16)}`;

/** host-local with one range per given subnet (dual stack when both are given). */
export function hostLocalRanges(kw: K8sWorld, subnets: string[]): Record<string, unknown> {
  return { type: 'host-local', dataDir: kw.w.ipamDir, ranges: subnets.map((subnet) => [{ subnet }]) };
}

/** The cluster network as a conflist over the given ranges (bridge, default routes via the bridge) plus `more`. */
export function clusterNet(
  kw: K8sWorld,
  subnets: string[],
  more: Record<string, unknown>[] = [],
): Record<string, unknown> {
  return {
    cniVersion: kw.cniVersion,
    name: CLUSTER_NET,
    plugins: [
      {
        type: 'bridge',
        bridge: kw.w.bridge,
        isGateway: true,
        isDefaultGateway: true,
        ipMasq: false,
        ipam: hostLocalRanges(kw, subnets),
      },
      ...more,
    ],
  };
}

/** The multus config of world.ts with `cluster` as delegates[0]. */
export function multusWith(
  kw: K8sWorld,
  kubeconfig: string,
  cluster: Record<string, unknown>,
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  return { ...kw.multusConfig(kubeconfig, extra), delegates: [cluster] };
}

/** Default routes of one family in the pod namespace, as `gateway dev`. */
export async function defaultRoutes(sb: Sandbox, family: '4' | '6'): Promise<string[]> {
  const out = await ip(sb.netns, ['-j', `-${family}`, 'route', 'show', 'default']);
  const routes = out.trim() === '' ? [] : (JSON.parse(out) as IpRoute[]);
  return routes.map((r) => `${r.gateway ?? '-'} ${r.dev ?? '-'}`);
}

/** The kernel's choice for `dst` inside the pod: `gateway dev`. */
export async function routeGet(sb: Sandbox, dst: string): Promise<string> {
  const r = (JSON.parse(await ip(sb.netns, ['-j', 'route', 'get', dst])) as IpRoute[])[0];
  return `${r?.gateway ?? '-'} ${r?.dev ?? '-'}`;
}

/** The `result` of multus' libcni result cache `<cniDir>/results/<network>-<containerID>-<ifname>`. */
export async function cachedResult(
  kw: K8sWorld,
  sb: Sandbox,
  network: string,
  ifname: string,
): Promise<Record<string, any>> {
  const file = join(kw.w.cniDir, 'results', `${network}-${sb.containerId}-${ifname}`);
  return (JSON.parse(await readFile(file, 'utf8')) as { result: Record<string, any> }).result;
}

/** `dst via gw` of the routes of a cached result (top-level layout). */
export const cachedRoutes = (result: Record<string, any>): string[] =>
  ((result.routes ?? []) as { dst: string; gw?: string }[]).map((r) => `${r.dst} via ${r.gw ?? '-'}`);

export const v6 = (link: IpLink | undefined): string[] =>
  (link?.addr_info ?? [])
    .filter((a) => a.family === 'inet6' && a.scope !== 'link')
    .map((a) => `${a.local}/${a.prefixlen}`);

/** The host-namespace end of the pod's veth `ifname`. */
export async function hostPeer(kw: K8sWorld, sb: Sandbox, ifname: string): Promise<string> {
  const podLink = (await readLinks(sb.netns)).find((l) => l.ifname === ifname);
  const peer = (await readLinks(kw.w.hostNs)).find((h) => h.ifindex === podLink?.link_index);
  if (!peer) throw new Error(`no host peer of ${ifname} in ${kw.w.hostNs}`);
  return peer.ifname;
}

export async function hostLinksOfKind(kw: K8sWorld, kind: string): Promise<string[]> {
  return (await readLinks(kw.w.hostNs)).filter((l) => l.linkinfo?.info_kind === kind).map((l) => l.ifname);
}

export interface Qdisc {
  kind: string;
  handle?: string;
  root?: boolean;
  options?: Record<string, any>;
}

/** `tc -j qdisc show dev <dev>` in the host namespace. */
export async function qdiscs(kw: K8sWorld, dev: string): Promise<Qdisc[]> {
  const out = await runOk('tc', ['-n', kw.w.hostNs, '-j', 'qdisc', 'show', 'dev', dev]);
  return out.trim() === '' ? [] : (JSON.parse(out) as Qdisc[]);
}

/** `iptables-save -t nat` of the host namespace. */
export function natRules(kw: K8sWorld): Promise<string> {
  return runOk('ip', ['netns', 'exec', kw.w.hostNs, 'iptables-save', '-t', 'nat']);
}

/**
 * After an ADD that failed once delegates had run: the rollback left the pod namespace with lo only, no
 * cache of the container, no reserved IP, no host veth or ifb (the bridges themselves stay, as the bridge
 * plugin's DEL leaves them), and no network-status.
 */
export async function expectRolledBack(kw: K8sWorld, sb: Sandbox): Promise<void> {
  expect(await linkNames(sb.netns), 'pod namespace links').toEqual(['lo']);
  expect(await kw.cacheFiles(sb), 'cache files').toEqual([]);
  expect(await reservedIps(kw.w.ipamDir), 'reserved IPs').toEqual([]);
  const host = await readLinks(kw.w.hostNs);
  const left = host.filter(
    (l) =>
      l.ifname !== kw.w.master &&
      l.ifname !== kw.w.masterPeer &&
      l.ifname !== 'lo' &&
      l.linkinfo?.info_kind !== 'bridge',
  );
  expect(
    left.map((l) => `${l.ifname} (${l.linkinfo?.info_kind})`),
    'host links besides bridges',
  ).toEqual([]);
  expect(await networkStatus(kw.cluster, sb.pod), 'network-status annotation').toBeUndefined();
  expect(await listDir(kw.w.cniDir).then((d) => d.filter((f) => f !== 'results')), 'scratch cache').toEqual([]);
}

/** The `--to-destination` of every rule of `iptables-save` output that matches `--dport <port>`, sorted. */
export function dnatTargets(save: string, port: number): string[] {
  return save
    .split('\n')
    .filter((l) => l.includes(`--dport ${port} `) && l.includes('--to-destination'))
    .map((l) => /--to-destination (\S+)/.exec(l)![1]!)
    .sort();
}
