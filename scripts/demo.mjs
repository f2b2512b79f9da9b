#!/usr/bin/env node
/**
 * `npm run demo` (needs root): one pod's life through build/multus with real plugins, run exactly as a
 * container runtime runs a CNI plugin: the CNI_* environment, the network config on stdin, the result or a
 * CNI error on stdout.
 *
 * It makes a throwaway pod network namespace and a veth pair (one end is the macvlan master), writes a multus
 * config whose delegates are a bridge + host-local conflist (the cluster network, eth0) and macvlan +
 * host-local (net1), then runs ADD, CHECK and DEL, printing the result and what the pod got. After DEL it
 * shows that nothing is left. Everything it made (namespace, bridge, veths, temp dirs, the ip_forward sysctl
 * the bridge plugin turns on) is undone at the end, also when a step fails or on Ctrl-C.
 */
import { execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const MULTUS = join(ROOT, 'build/multus');
const PLUGIN_DIR = '/usr/lib/cni';
const VERSION = '1.0.0';

const id = randomBytes(3).toString('hex');
const names = {
  netns: `mts-demo-${id}`,
  bridge: `mtsdbr${id}`,
  master: `mtsdva${id}`,
  masterPeer: `mtsdvb${id}`,
  containerId: `mts-demo-${id}`,
};
const netnsPath = `/var/run/netns/${names.netns}`;
const CLUSTER_SUBNET = '10.254.77.0/24';
const MACVLAN_SUBNET = '10.254.78.0/24';

const bold = (s) => (process.stdout.isTTY ? `\x1b[1m${s}\x1b[0m` : s);
const step = (s) => console.log(`\n${bold(`== ${s}`)}`);

/** Runs a command with an argument array; resolves with {code, stdout, stderr}. */
/** @param {string} file @param {string[]} args @param {{input?: string, env?: NodeJS.ProcessEnv}} [opts] */
function run(file, args, { input, env } = {}) {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(file, args, { env: env ?? process.env, stdio: ['pipe', 'pipe', 'pipe'] });
    const out = [];
    const err = [];
    child.stdout.on('data', (b) => out.push(b));
    child.stderr.on('data', (b) => err.push(b));
    child.on('error', reject);
    child.on('close', (code, signal) =>
      resolvePromise({
        code: code ?? signal,
        stdout: Buffer.concat(out).toString(),
        stderr: Buffer.concat(err).toString(),
      }),
    );
    child.stdin.on('error', () => {});
    child.stdin.end(input ?? '');
  });
}

async function must(file, args, opts) {
  const r = await run(file, args, opts);
  if (r.code !== 0) throw new Error(`${file} ${args.join(' ')} failed (${r.code}): ${(r.stderr || r.stdout).trim()}`);
  return r.stdout;
}

function execFileOk(file, args) {
  return new Promise((res) => execFile(file, args, (err) => res(!err)));
}

const cleanups = [];
let cleaning;
/** Undoes everything in reverse order, once; a second caller (signal vs. normal exit) waits for the first. */
function cleanup() {
  cleaning ??= (async () => {
    for (const fn of [...cleanups].reverse()) {
      try {
        await fn();
      } catch (e) {
        console.error(`cleanup: ${e.message}`);
      }
    }
  })();
  return cleaning;
}

/** Runs build/multus once, as a runtime would. */
async function multus(command, config) {
  const env = {
    PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin',
    CNI_COMMAND: command,
    CNI_CONTAINERID: names.containerId,
    CNI_NETNS: netnsPath,
    CNI_IFNAME: 'eth0',
    CNI_PATH: PLUGIN_DIR,
    CNI_ARGS: `IgnoreUnknown=1;K8S_POD_NAMESPACE=demo;K8S_POD_NAME=demo-pod;K8S_POD_INFRA_CONTAINER_ID=${names.containerId}`,
  };
  const r = await run(MULTUS, [], { input: JSON.stringify(config), env });
  if (r.stderr.trim()) console.log(r.stderr.trim());
  if (r.code !== 0) throw new Error(`multus ${command} exited ${r.code}: ${r.stdout.trim()}`);
  return r.stdout;
}

async function main() {
  if (process.getuid?.() !== 0) {
    console.error('demo: needs root (it creates a network namespace, a bridge and veth links)');
    return 1;
  }
  if (!existsSync(join(PLUGIN_DIR, 'bridge'))) {
    console.error(
      `demo: no CNI plugins in ${PLUGIN_DIR}; run scripts/setup.sh (apt-get install containernetworking-plugins)`,
    );
    return 1;
  }
  if (!existsSync(MULTUS)) {
    step('building build/multus (npm run build)');
    const code = await new Promise((res) =>
      spawn('npm', ['run', 'build'], { cwd: ROOT, stdio: 'inherit' }).on('close', res),
    );
    if (code !== 0 || !existsSync(MULTUS)) {
      console.error('demo: npm run build did not produce build/multus');
      return 1;
    }
  }

  // Everything below is undone in reverse order by cleanup().
  const ipForward = (await readFile('/proc/sys/net/ipv4/ip_forward', 'utf8')).trim();
  cleanups.push(() => writeFile('/proc/sys/net/ipv4/ip_forward', ipForward));
  const dir = await mkdtemp(join(tmpdir(), 'multus-demo-'));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  const cniDir = join(dir, 'multus');
  const ipamDir = join(dir, 'ipam');

  step(`setup: netns ${names.netns}, veth ${names.master}/${names.masterPeer} (macvlan master), temp dir ${dir}`);
  await must('ip', ['netns', 'add', names.netns]);
  cleanups.push(() => run('ip', ['netns', 'delete', names.netns]));
  cleanups.push(() => run('ip', ['link', 'delete', names.bridge]));
  await must('ip', ['link', 'add', names.master, 'type', 'veth', 'peer', 'name', names.masterPeer]);
  cleanups.push(() => run('ip', ['link', 'delete', names.master]));
  await must('ip', ['link', 'set', names.master, 'up']);
  await must('ip', ['link', 'set', names.masterPeer, 'up']);

  const cluster = {
    cniVersion: VERSION,
    name: 'demo-cluster',
    plugins: [
      {
        type: 'bridge',
        bridge: names.bridge,
        isGateway: true,
        isDefaultGateway: true,
        ipMasq: false,
        ipam: { type: 'host-local', dataDir: ipamDir, subnet: CLUSTER_SUBNET },
      },
    ],
  };
  const macvlan = {
    cniVersion: VERSION,
    name: 'demo-macvlan',
    type: 'macvlan',
    master: names.master,
    mode: 'bridge',
    ipam: { type: 'host-local', dataDir: ipamDir, subnet: MACVLAN_SUBNET },
  };
  const config = {
    cniVersion: VERSION,
    name: 'multus-cni-network',
    type: 'multus',
    cniDir,
    binDir: PLUGIN_DIR,
    logLevel: 'verbose',
    logToStderr: false,
    logFile: join(dir, 'multus.log'),
    delegates: [cluster, macvlan],
  };
  console.log(JSON.stringify(config, null, 2));

  step('ADD');
  const addOut = await multus('ADD', config);
  const result = JSON.parse(addOut);
  console.log(JSON.stringify(result, null, 2));

  step(`ip -n ${names.netns} addr`);
  console.log((await must('ip', ['-n', names.netns, 'addr'])).trimEnd());
  step(`ip -n ${names.netns} route`);
  console.log((await must('ip', ['-n', names.netns, 'route'])).trimEnd());
  step(`caches in ${cniDir}`);
  console.log(
    [...(await readdir(cniDir)), ...(await readdir(join(cniDir, 'results'))).map((f) => `results/${f}`)].join('\n'),
  );

  // A runtime (libcni) passes the ADD result back as prevResult on CHECK and DEL for configs >= 0.4.0.
  const withPrev = { ...config, prevResult: result };

  step('CHECK');
  await multus('CHECK', withPrev);
  console.log('ok');

  step('DEL');
  await multus('DEL', withPrev);
  console.log('ok');

  step('after DEL');
  const left = [];
  const addrs = await must('ip', ['-n', names.netns, 'addr']);
  console.log(addrs.trimEnd());
  for (const ifname of ['eth0', 'net1']) {
    if (new RegExp(`\\b${ifname}[@:]`).test(addrs)) left.push(`${ifname} in ${names.netns}`);
  }
  const hostVeth = (result.interfaces ?? []).find((i) => !i.sandbox && i.name !== names.bridge)?.name;
  if (hostVeth && (await execFileOk('ip', ['link', 'show', hostVeth]))) left.push(`host veth ${hostVeth}`);
  const reserved = [];
  for (const net of existsSync(ipamDir) ? await readdir(ipamDir) : []) {
    for (const f of await readdir(join(ipamDir, net))) if (/^[0-9.]+$|:/.test(f)) reserved.push(`${net}/${f}`);
  }
  if (reserved.length) left.push(`host-local reservations ${reserved.join(', ')}`);
  const cacheFiles = [
    ...(existsSync(join(cniDir, names.containerId)) ? [names.containerId] : []),
    ...(existsSync(join(cniDir, 'results')) ? await readdir(join(cniDir, 'results')) : []),
  ];
  if (cacheFiles.length) left.push(`cache files ${cacheFiles.join(', ')}`);
  if (left.length) {
    console.error(`left behind after DEL: ${left.join('; ')}`);
    return 1;
  }
  console.log(`nothing left: no eth0/net1, host veth ${hostVeth ?? '(none)'} gone, no reserved IPs, no cache files`);
  return 0;
}

for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, () => {
    console.error(`\n${sig}: cleaning up`);
    cleanup().finally(() => process.exit(130));
  });
}

let code = 1;
try {
  code = await main();
} catch (e) {
  console.error(`demo failed: ${e.message}`);
  code = 1;
} finally {
  await cleanup();
}
process.exit(code);
