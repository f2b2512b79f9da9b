/**
 * critest, cri-tools' own CRI validation suite (sigs.k8s.io/cri-tools v1.37.0, built by build-critest.sh), run
 * against a runtime fixture whose CNI config is multus-ts, thin or resident, delegating to bridge + portmap (see
 * docs/archive/kubernetes-tests.md, "critest").
 *
 * critest's pods are not in any API server, so the multus config names no kubeconfig: Multus' delegates-only
 * mode, where every pod gets the configured delegates (here one conflist: bridge, then portmap with the
 * `portMappings` capability). With a kubeconfig, Go Multus answers an ADD for a pod the API does not know with its
 * synthetic "pod not found" result (0.0.0.0/0, no delegate run), and critest's port-mapping specs would fail under
 * it; multus-ts attaches the configured networks then (docs/compatibility.md). Delegates-only is the mode where
 * both give critest's pods a network.
 *
 * critest runs in the runtime's network namespace (nsenter --net): its host-port spec fetches
 * http://127.0.0.1:12000, the container-port spec the pod's IP, both from the runtime's side as a kubelet would.
 * Its JSON report gives the counts the tier prints and checks.
 */
import { chmod, copyFile, mkdir, readFile, readdir, rmdir, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { expect } from 'vitest';
import { type Requirement, fileExists } from '../helpers/skip.ts';
import { Daemon, type Mode, SHIM_BIN } from './cri-suite.ts';
import { type Runtime, run, runOk } from './runtime.ts';

const CACHE_DIR = join(process.env.MULTUS_TS_CACHE_DIR || join(import.meta.dirname, '../../.cache'), 'critest');
const CRITEST_BIN = join(CACHE_DIR, 'critest');
const CRITEST_IMAGES_TAR = join(CACHE_DIR, 'images.tar');
const CRITEST_IMAGES_YAML = join(CACHE_DIR, 'images.yaml');
/** The repository the images are imported under (images.tar's tags: busybox, httpd). */
const CRITEST_IMAGE_REPO = 'localhost/critest';

/**
 * The specs the tier runs (ginkgo --focus, each a regular expression): networking and runtime status, and the
 * sandbox lifecycle and port-forward specs, whose ADDs and DELs (stop twice, remove unstopped, stop or remove
 * unknown) go through multus-ts too.
 */
const CRITEST_FOCUS = [
  'runtime should support networking',
  'runtime should return runtime conditions',
  'runtime should support basic operations on PodSandbox',
  'PodSandbox should not return an error if',
  'runtime should support portforward \\[Conformance\\]',
];
/**
 * What the focus selects in v1.37.0, as `<innermost container>: <spec>` (checked against the report, so a
 * renamed or added spec is noticed).
 */
const CRITEST_SPECS = [
  'runtime should support networking: runtime should support DNS config [Conformance]',
  'runtime should support networking: runtime should support set hostname [Conformance]',
  'runtime should support networking: runtime should support port mapping with only container port [Conformance]',
  'runtime should support networking: runtime should support port mapping with host port and container port [Conformance]',
  'runtime should support returning runtime info: runtime should return runtime conditions [Conformance]',
  'runtime should support basic operations on PodSandbox: runtime should support running PodSandbox [Conformance]',
  'runtime should support basic operations on PodSandbox: runtime should support stopping PodSandbox [Conformance]',
  'runtime should support basic operations on PodSandbox: runtime should support removing PodSandbox [Conformance]',
  'runtime should support basic operations on PodSandbox: runtime should support preserving PodSandbox attributes [Conformance]',
  'StopPodSandbox: should not return an error if not found',
  'StopPodSandbox: should not return an error if already stopped',
  'RemovePodSandbox: should not return an error if not found',
  'runtime should support streaming interfaces: runtime should support portforward [Conformance]',
];

/**
 * Focused specs a runtime cannot pass for reasons of its own, not the network's: skipped (--ginkgo.skip) with
 * the reason printed. The report must then list exactly the others.
 */
const CRITEST_SKIPS: Readonly<Record<string, { spec: string; reason: string }[]>> = {
  containerd: [
    {
      spec: 'StopPodSandbox: should not return an error if not found',
      reason:
        'containerd 1.6 answers StopPodSandbox of an unknown sandbox with NotFound ("an error occurred when try to ' +
        'find sandbox"), where the CRI wants success; no CNI call is made',
    },
  ],
};

export function critestRequirements(): Requirement[] {
  const build = 'bash test/runtime/build-critest.sh';
  return [
    fileExists(CRITEST_BIN, `critest (${build})`),
    fileExists(CRITEST_IMAGES_TAR, `critest's images (${build})`),
    fileExists(CRITEST_IMAGES_YAML, `critest's --test-images-file (${build})`),
    fileExists(join('/usr/lib/cni', 'portmap'), 'the portmap plugin (containernetworking-plugins)'),
  ];
}

/** The delegate of every critest pod: a bridge with host-local, then portmap (host ports, SNAT of 127.0.0.1). */
function critestNetwork(name: string, bridge: string, subnet: string, ipamDir: string): Record<string, unknown> {
  return {
    cniVersion: '1.0.0',
    name,
    plugins: [
      {
        type: 'bridge',
        bridge,
        isGateway: true,
        ipMasq: true,
        ipam: { type: 'host-local', dataDir: ipamDir, ranges: [[{ subnet }]], routes: [{ dst: '0.0.0.0/0' }] },
      },
      { type: 'portmap', capabilities: { portMappings: true }, snat: true },
    ],
  };
}

interface CritestSpec {
  name: string;
  state: string;
  failure?: string;
}

interface CritestReport {
  code: number | null;
  /** critest's own closing lines ("Ran 13 of 142 Specs ...", "SUCCESS! -- 13 Passed | 0 Failed | ..."). */
  summary: string;
  /** The focused specs (leaf `It` nodes that ran or were skipped by the suite, not by the focus). */
  specs: CritestSpec[];
  passed: number;
  failed: number;
  /** Specs the focus left out. */
  filtered: number;
  total: number;
  output: string;
}

interface GinkgoSpecReport {
  ContainerHierarchyTexts?: string[];
  LeafNodeType: string;
  LeafNodeText: string;
  State: string;
  Failure?: { Message?: string; Location?: { FileName?: string; LineNumber?: number } };
}

/**
 * Runs critest against the fixture's CRI socket from the fixture's network namespace, with the images file and
 * the focus; its stdout and JSON report land in the fixture's dir (critest-<label>.log/.json).
 */
function skipsOf(rt: Runtime): { spec: string; reason: string }[] {
  return CRITEST_SKIPS[rt.kind] ?? [];
}

async function runCritest(rt: Runtime, label: string): Promise<CritestReport> {
  const report = join(rt.dir, `critest-${label}.json`);
  const endpoint = `unix://${rt.socket}`;
  const args = [
    ...rt.nsenterArgs(),
    CRITEST_BIN,
    `--runtime-endpoint=${endpoint}`,
    `--image-endpoint=${endpoint}`,
    `--config=${join(rt.dir, 'crictl.yaml')}`,
    `--test-images-file=${CRITEST_IMAGES_YAML}`,
    ...CRITEST_FOCUS.map((f) => `--ginkgo.focus=${f}`),
    ...skipsOf(rt).map((s) => `--ginkgo.skip=${s.spec.replace(': ', ' ').replace(/[[\]]/g, '\\$&')}`),
    `--ginkgo.json-report=${report}`,
    '--ginkgo.no-color',
    '--ginkgo.timeout=10m',
  ];
  const r = await run('nsenter', args, { timeoutMs: 900_000 });
  const output = `${r.stdout}${r.stderr}`;
  await writeFile(join(rt.dir, `critest-${label}.log`), output, { mode: 0o600 });
  const suites = JSON.parse(await readFile(report, 'utf8').catch(() => '[]')) as { SpecReports?: GinkgoSpecReport[] }[];
  const leaves = (suites[0]?.SpecReports ?? []).filter((s) => s.LeafNodeType === 'It');
  const focused = leaves.filter((s) => !(s.State === 'skipped' && !s.Failure?.Message));
  const specs = focused.map((s) => ({
    name: `${s.ContainerHierarchyTexts?.at(-1) ?? ''}: ${s.LeafNodeText}`,
    state: s.State,
    ...(s.Failure?.Message ? { failure: `${s.Failure.Message} (${s.Failure.Location?.FileName ?? '?'})` } : {}),
  }));
  const summary = output
    .split('\n')
    .filter((l) => /^Ran \d+ of \d+ Specs|(SUCCESS|FAIL)! -- /.test(l.trim()))
    .map((l) => l.trim())
    .join('\n');
  return {
    code: r.code,
    summary,
    specs,
    passed: specs.filter((s) => s.state === 'passed').length,
    failed: specs.filter((s) => s.state !== 'passed').length,
    filtered: leaves.length - focused.length,
    total: leaves.length,
    output,
  };
}

/** `<network>/<ip>` files of host-local's data dir (leases left by a pod whose DEL did not run). */
async function leases(ipamDir: string): Promise<string[]> {
  const found: string[] = [];
  for (const net of await readdir(ipamDir).catch(() => [] as string[])) {
    for (const f of await readdir(join(ipamDir, net))) if (/^[0-9.]+$/.test(f)) found.push(`${net}/${f}`);
  }
  return found.sort();
}

/** Lines of a log file that mention `text`. */
async function logLines(file: string, text: string): Promise<string[]> {
  const all = (await readFile(file, 'utf8').catch(() => '')).split('\n');
  return all.filter((l) => l.includes(text));
}

const BRIDGE = 'mtscrit0';
const SUBNET = '10.248.0.0/24';

/**
 * The whole run on one prepared (not started) fixture: multus-ts as its CNI config (thin: 00-multus.conf naming
 * build/multus with the delegate; resident: `build/multus daemon` generating 00-multus.conf for the shim from
 * the delegate as master config), the images imported, critest run; then its counts printed and checked, the
 * ADDs found in multus' logs, and nothing left (sandboxes, links, leases, caches). Stops nothing: the caller's
 * `finally` does (the daemon is put in `held` as soon as it exists).
 */
export async function critestThrough(rt: Runtime, mode: Mode, label: string, held: { daemon?: Daemon }): Promise<void> {
  const ipamDir = join(rt.dir, 'ipam');
  const cniDir = join(rt.dir, 'multus');
  // names of the fixture's own (crio.ts: CRI-O's start-up GC must not reach other fixtures' cached attachments)
  const net = critestNetwork(`critest-${rt.id}`, BRIDGE, SUBNET, ipamDir);
  // CRI-O's libcni knows CNI 1.1.0 (STATUS for NetworkReady, GC on start); containerd 1.6's does not
  const cniVersion = rt.kind === 'crio' ? '1.1.0' : '1.0.0';
  const logFile = join(rt.dir, mode === 'thin' ? 'multus.log' : 'daemon.log');
  let daemon: Daemon | undefined;
  if (mode === 'thin') {
    await rt.writeConf('00-multus.conf', {
      cniVersion,
      name: `multus-${rt.id}`,
      type: 'multus',
      capabilities: { portMappings: true },
      cniDir,
      binDir: rt.binDir,
      logLevel: 'debug',
      logFile,
      delegates: [net],
    });
  } else {
    await copyFile(SHIM_BIN, join(rt.binDir, 'multus-shim'));
    await chmod(join(rt.binDir, 'multus-shim'), 0o755);
    const masterDir = join(rt.dir, 'master.d');
    await mkdir(masterDir, { recursive: true, mode: 0o700 });
    await writeFile(join(masterDir, '10-critest.conflist'), JSON.stringify(net), { mode: 0o600 });
    daemon = new Daemon(rt, {
      cniDir,
      binDir: rt.binDir,
      socketDir: join(rt.dir, 'run'),
      cniConfigDir: rt.confDir,
      multusConfigFile: 'auto',
      multusAutoconfigDir: masterDir,
      overrideNetworkName: true,
      cniVersion,
      logLevel: 'verbose',
      logFile,
      logToStderr: false,
    });
    held.daemon = daemon;
  }
  await rt.start();
  await daemon?.start();
  if (daemon) {
    const generated = JSON.parse(await readFile(daemon.generatedConf, 'utf8')) as Record<string, unknown>;
    expect(generated.type, 'the generated config').toBe('multus-shim');
    expect(generated.capabilities, "the master config's capabilities in the generated config").toEqual({
      portMappings: true,
    });
  }
  await rt.importImages(CRITEST_IMAGES_TAR, CRITEST_IMAGE_REPO);
  if (rt.kind === 'crio') {
    // CRI-O maps host ports itself (its hostport manager, not CNI's portmap), without the SNAT of 127.0.0.1 that
    // the host-port spec's request needs: its own CI prepares the host for critest with these two
    // (contrib/test/ci/critest.yml), here inside the fixture's namespace; on a node kube-proxy does the same
    await runOk('nsenter', [...rt.nsenterArgs(), 'sysctl', '-qw', 'net.ipv4.conf.all.route_localnet=1']);
    const masq = ['-t', 'nat', '-I', 'POSTROUTING', '-s', '127.0.0.0/8', '!', '-d', '127.0.0.0/8', '-j', 'MASQUERADE'];
    await runOk('nsenter', [...rt.nsenterArgs(), 'iptables', ...masq]);
  }

  // a node is NotReady until its runtime says NetworkReady (CRI-O: after its start-up GC and a STATUS that
  // succeeded), and the runtime-conditions spec reads the conditions once: start critest on a ready runtime
  await rt.waitNetworkReady();
  const r = await runCritest(rt, label);
  const skips = skipsOf(rt);
  console.log(
    `critest ${label}: ${r.summary.replaceAll('\n', '; ')}\n` +
      [
        ...r.specs.map((s) => `  ${s.state}: ${s.name}${s.failure ? ` -- ${s.failure}` : ''}`),
        ...skips.map((s) => `  skipped here: ${s.spec} -- ${s.reason}`),
      ].join('\n'),
  );
  const expected = CRITEST_SPECS.filter((name) => !skips.some((s) => s.spec === name)).sort();
  expect(r.specs.map((s) => s.name).sort(), 'the focused specs').toEqual(expected);
  expect(
    r.specs.filter((s) => s.state !== 'passed'),
    `critest's failed specs (log: critest-${label}.log)\n${r.output.slice(-4000)}`,
  ).toEqual([]);
  expect(r.code, 'critest exit code').toBe(0);
  expect(r.summary).toMatch(new RegExp(`SUCCESS! -- ${expected.length} Passed \\| 0 Failed`));

  // the specs' ten sandboxes (networking 4, PodSandbox operations 4, already stopped 1, port-forward 1) went through
  // multus-ts (thin: its own log; resident: the daemon's) and
  // the host-port spec's mapping reached portmap through it (thin: the delegate's stdin is logged at debug)
  const adds = await logLines(logFile, mode === 'thin' ? '] ADD containerId=' : '] ADD ');
  expect(adds.filter((l) => mode === 'thin' || / ADD [0-9a-f]{64}: 200 /.test(l)).length, `ADDs in ${logFile}`).toBe(
    10,
  );
  if (mode === 'thin') {
    // containerd passes the mapping to the CNI config (capability portMappings, go-cni's `HostPort` spelling,
    // which multus-ts gives portmap as the conventions' `hostPort`, as Multus does); CRI-O keeps it to itself
    const portmap = await logLines(logFile, '] ADD portmap ');
    const mapped = portmap.filter((l) => /"hostPort":12000,"containerPort":80,"protocol":"tcp"/.test(l));
    expect(mapped.length, "portmap ADDs with the host-port spec's mapping").toBe(rt.kind === 'crio' ? 0 : 1);
    expect(
      portmap.filter((l) => /"HostPort"/.test(l)),
      "go-cni's spelling reaching portmap",
    ).toEqual([]);
  }
  // and critest removed them: nothing of them is left
  expect(await rt.pods(), 'sandboxes').toEqual([]);
  const host = JSON.parse(await runOk('ip', ['-n', rt.hostNs, '-j', '-d', 'link', 'show'])) as {
    ifname: string;
    linkinfo?: { info_kind?: string };
  }[];
  expect(
    host.filter((l) => l.ifname !== 'lo' && l.linkinfo?.info_kind !== 'bridge').map((l) => l.ifname),
    "links in the runtime's namespace",
  ).toEqual([]);
  expect(await leases(ipamDir), "IPs reserved in host-local's dir").toEqual([]);
  const caches = await readdir(cniDir).catch(() => [] as string[]);
  expect(
    caches.filter((f) => f !== 'results'),
    'multus scratch caches',
  ).toEqual([]);
  expect(await readdir(join(cniDir, 'results')).catch(() => []), 'multus result caches').toEqual([]);
}

/** critest's cgroup parent when the runtime does not answer RuntimeConfig (containerd 1.6). */
const TEST_SLICE = 'test.slice';

/** Cgroup hierarchies (v1 controllers, or the v2 root) that hold a `test.slice`. */
async function testSlices(): Promise<string[]> {
  const roots = (await readdir('/sys/fs/cgroup').catch(() => [] as string[])).map((c) => join('/sys/fs/cgroup', c));
  const found: string[] = [];
  for (const dir of ['/sys/fs/cgroup', ...roots].map((r) => join(r, TEST_SLICE))) {
    if (
      await stat(dir)
        .then((s) => s.isDirectory())
        .catch(() => false)
    )
      found.push(dir);
  }
  return found;
}

/**
 * For a file whose runtime leaves critest's `test.slice` behind: call at the start (what was there), and the
 * returned function at the end, which removes the slices that were not there before, if they are empty.
 */
export async function testSliceCleanup(): Promise<() => Promise<void>> {
  const before = await testSlices();
  return async () => {
    for (const dir of await testSlices()) if (!before.includes(dir)) await rmdir(dir).catch(() => {});
  };
}
