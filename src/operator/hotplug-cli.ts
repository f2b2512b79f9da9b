/**
 * operator/hotplug-cli.ts: `multus hotplug add|del|check --pod NS/NAME --network [NS/]NAD[@IFNAME] [--ip CIDR]...
 * [--mac MAC] [--cni-arg K=V]... [--socket-dir DIR] [--cni-dir DIR | --conf FILE]`, a client of the daemon's
 * `POST /delegate` (docs/hotplug.md).
 *
 * The pod's sandbox is found in multus' caches on this node: the libcni result caches record each
 * attachment's container ID, netns path and CNI_ARGS (pod namespace, name and UID); the container must still
 * have a scratch cache. The NAD is sent by name (the daemon reads it, with namespace isolation). Without
 * `@IFNAME`, add takes the first free net<N> and del/check the pod's one attachment of that NAD.
 * Exit codes: 0 done, 1 the request failed (the CNI error JSON on stdout), 2 bad usage.
 */
import { existsSync, readFileSync } from 'node:fs';
import { request } from 'node:http';
import { join } from 'node:path';
import { CniCode, CniError, messageOf, toCniError } from '../base/errors.ts';
import { CURRENT_VERSION } from '../base/versions.ts';
import { readScratchCache } from '../multus/scratch-cache.ts';
import { cachedAttachments } from '../hotplug/hotplug.ts';
import { listSandboxes } from '../hotplug/sandboxes.ts';

export interface HotplugArgs {
  command: 'ADD' | 'DEL' | 'CHECK';
  namespace: string;
  name: string;
  network: string;
  ifName: string;
  ips: string[];
  mac: string;
  configArgs: Record<string, string>;
  socketDir: string;
  cniDir: string;
}

export const DEFAULT_SOCKET_DIR = '/run/multus/';
const DEFAULT_CNI_DIR = '/var/lib/cni/multus';
const DEFAULT_CONF = '/etc/cni/net.d/00-multus.conf';
const USAGE =
  'usage: multus hotplug add|del|check --pod NS/NAME --network [NS/]NAD[@IFNAME] [--ip CIDR]... [--mac MAC] ' +
  '[--cni-arg KEY=VALUE]... [--socket-dir DIR] [--cni-dir DIR | --conf 00-multus.conf]';

export class UsageError extends Error {}

function cniDirOf(conf: string): string {
  try {
    const value = (JSON.parse(readFileSync(conf, 'utf8')) as Record<string, unknown>).cniDir;
    return typeof value === 'string' && value !== '' ? value : DEFAULT_CNI_DIR;
  } catch (e) {
    throw new UsageError(`cannot read ${conf}: ${messageOf(e)} (pass --cni-dir DIR)`);
  }
}

/** The command line, checked (pure except reading --conf for its cniDir). */
export function parseHotplugArgs(argv: string[]): HotplugArgs {
  const verb = argv[0];
  const command = ({ add: 'ADD', del: 'DEL', check: 'CHECK' } as const)[verb as 'add' | 'del' | 'check'];
  if (!command) throw new UsageError(`unknown hotplug command "${verb ?? ''}": ${USAGE}`);
  const out: HotplugArgs = {
    command,
    namespace: '',
    name: '',
    network: '',
    ifName: '',
    ips: [],
    mac: '',
    configArgs: {},
    socketDir: DEFAULT_SOCKET_DIR,
    cniDir: '',
  };
  let conf = '';
  for (let i = 1; i < argv.length; i++) {
    const flag = argv[i]!;
    const value = argv[++i];
    if (value === undefined || value.startsWith('--')) throw new UsageError(`${flag} needs a value: ${USAGE}`);
    if (flag === '--pod') {
      const [ns, name, extra] = value.split('/');
      if (!ns || !name || extra !== undefined) throw new UsageError(`--pod must be NAMESPACE/NAME, got "${value}"`);
      out.namespace = ns;
      out.name = name;
    } else if (flag === '--network') {
      const at = value.indexOf('@');
      out.network = at < 0 ? value : value.slice(0, at);
      if (at >= 0) out.ifName = value.slice(at + 1);
      if (!out.network || (at >= 0 && !out.ifName))
        throw new UsageError(`--network must be [NS/]NAD[@IFNAME], got "${value}"`);
    } else if (flag === '--ip') out.ips.push(value);
    else if (flag === '--mac') out.mac = value;
    else if (flag === '--cni-arg') {
      const eq = value.indexOf('=');
      if (eq <= 0) throw new UsageError(`--cni-arg must be KEY=VALUE, got "${value}"`);
      out.configArgs[value.slice(0, eq)] = value.slice(eq + 1);
    } else if (flag === '--socket-dir') out.socketDir = value;
    else if (flag === '--cni-dir') out.cniDir = value;
    else if (flag === '--conf') conf = value;
    else throw new UsageError(`unknown flag "${flag}": ${USAGE}`);
  }
  if (!out.namespace) throw new UsageError(`--pod is required: ${USAGE}`);
  if (!out.network) throw new UsageError(`--network is required: ${USAGE}`);
  if (!out.cniDir)
    out.cniDir = conf ? cniDirOf(conf) : existsSync(DEFAULT_CONF) ? cniDirOf(DEFAULT_CONF) : DEFAULT_CNI_DIR;
  return out;
}

export interface Sandbox {
  containerId: string;
  netns: string;
  uid: string;
}

/** The pod's sandbox on this node, from the caches (one with a scratch cache; a live netns preferred). */
export function findSandbox(cniDir: string, namespace: string, name: string): Sandbox {
  let sandboxes = listSandboxes(cniDir).filter((s) => s.namespace === namespace && s.name === name);
  if (sandboxes.length > 1) sandboxes = sandboxes.filter((s) => existsSync(s.netns));
  if (sandboxes.length === 1) return sandboxes[0]!;
  if (sandboxes.length === 0) {
    throw new CniError(CniCode.UnknownContainer, `no sandbox of pod ${namespace}/${name} in ${cniDir}`, {
      details: "run this on the pod's node, with the cniDir of its multus config (--cni-dir or --conf)",
    });
  }
  const ids = sandboxes.map((s) => s.containerId).join(', ');
  throw new CniError(
    CniCode.UnknownContainer,
    `pod ${namespace}/${name} has several live sandboxes in ${cniDir}: ${ids}`,
  );
}

/** The interface to use: the given one; for add the first free net<N>; else the one attachment of the NAD. */
export function chooseIfName(a: HotplugArgs, cniDir: string, containerId: string): string {
  if (a.ifName) return a.ifName;
  const scratch = readScratchCache(cniDir, containerId);
  const attachments = scratch.kind === 'ok' ? cachedAttachments(scratch.value, 'eth0') : [];
  if (a.command === 'ADD') {
    const used = new Set(attachments.map((x) => x.ifName));
    for (let n = 1; ; n++) if (!used.has(`net${n}`)) return `net${n}`;
  }
  const full = a.network.includes('/') ? a.network : `${a.namespace}/${a.network}`;
  const matching = attachments.filter((x) => x.displayName === full);
  if (matching.length === 1) return matching[0]!.ifName;
  throw new CniError(
    CniCode.InvalidConfig,
    matching.length === 0
      ? `pod ${a.namespace}/${a.name} has no attachment of ${full}`
      : `pod ${a.namespace}/${a.name} has ${matching.length} attachments of ${full}: ` +
          `name one with --network ${a.network}@IFNAME`,
  );
}

/** The `/delegate` request body for these arguments and sandbox. */
export function hotplugBody(a: HotplugArgs, sb: Sandbox, ifName: string): string {
  const args = `K8S_POD_NAMESPACE=${a.namespace};K8S_POD_NAME=${a.name}${sb.uid ? `;K8S_POD_UID=${sb.uid}` : ''}`;
  const attributes: Record<string, unknown> = {
    'cni-args': Object.keys(a.configArgs).length > 0 ? a.configArgs : null,
  };
  if (a.ips.length > 0) attributes.ips = a.ips;
  if (a.mac) attributes.mac = a.mac;
  return JSON.stringify({
    env: {
      CNI_COMMAND: a.command,
      CNI_CONTAINERID: sb.containerId,
      CNI_NETNS: sb.netns,
      CNI_IFNAME: ifName,
      CNI_ARGS: args,
    },
    network: a.network,
    interfaceAttributes: attributes,
  });
}

function post(socket: string, body: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        socketPath: socket,
        path: '/delegate',
        method: 'POST',
        headers: { Host: 'dummy', 'Content-Type': 'application/json' },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

export interface CliIo {
  stdout(s: string): void;
  stderr(s: string): void;
}

const processIo: CliIo = { stdout: (s) => process.stdout.write(s), stderr: (s) => process.stderr.write(s) };

export async function runHotplugCli(argv: string[], io: CliIo = processIo): Promise<number> {
  let a: HotplugArgs;
  try {
    a = parseHotplugArgs(argv);
  } catch (e) {
    io.stderr(`multus hotplug: ${messageOf(e)}\n`);
    return 2;
  }
  try {
    const sb = findSandbox(a.cniDir, a.namespace, a.name);
    const ifName = chooseIfName(a, a.cniDir, sb.containerId);
    const socket = join(a.socketDir, 'multus.sock');
    let answer: { status: number; body: string };
    try {
      answer = await post(socket, hotplugBody(a, sb, ifName));
    } catch (e) {
      throw new CniError(CniCode.TryAgainLater, `cannot reach the multus daemon at ${socket}: ${messageOf(e)}`, {
        details: 'start `multus daemon`, or pass its --socket-dir',
      });
    }
    if (answer.status !== 200) {
      io.stdout(answer.body.endsWith('\n') ? answer.body : `${answer.body}\n`);
      return 1;
    }
    const result = (JSON.parse(answer.body) as { Result?: unknown }).Result;
    if (result !== null && result !== undefined) io.stdout(`${JSON.stringify(result, null, 4)}\n`);
    io.stderr(
      `${a.command} ${a.network} as ${ifName} in ${a.namespace}/${a.name} (container ${sb.containerId}): done\n`,
    );
    return 0;
  } catch (e) {
    const error = toCniError(e);
    io.stdout(`${JSON.stringify(error.toJSON(CURRENT_VERSION), null, 4)}\n`);
    return 1;
  }
}
