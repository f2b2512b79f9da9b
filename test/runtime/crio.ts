/**
 * CRI-O (v1.34.0, built by build-crio.sh) as the runtime fixture, beside containerd (runtime.ts): the same temp
 * dir, network namespace, CNI bin and conf dirs, crictl and cleanup, with CRI-O's own pieces (see
 * docs/archive/kubernetes-tests.md, "CRI-O"):
 *
 * - crio runs with Debian's conmon and runc, CRI-O's pinns (namespaces pinned under `<dir>/ns`, so the sandbox
 *   netns files are `<dir>/ns/netns/<uuid>`), cgroupfs, containers/storage (overlay) under `<dir>/root` and
 *   `<dir>/runroot`, its socket, logs, exit and attach dirs, version and shutdown files in the dir;
 * - NRI, metrics and the irqbalance restore are off (they would touch the machine's /var/run/nri and
 *   /etc/sysconfig);
 * - `_CRIO_ROOTLESS=1`: CRI-O gives the infra container oom_score_adj -998, which this machine cannot set (no
 *   CAP_SYS_RESOURCE; containerd's `restrict_oom_score_adj` is the same thing). CRI-O's rootless switch drops that
 *   and the cgroup resource limits, nothing about networking;
 * - images go into CRI-O's storage with skopeo (`oci-archive:` to `containers-storage:`), as CRI-O has no import
 *   call, in a mount namespace whose /var/lib is a tmpfs (containers/image's blob-info cache); the signature
 *   policy is containers-common's /etc/containers/policy.json, the per-namespace policy dir in the dir.
 *
 * CRI-O keeps libcni's result cache in the machine's /var/lib/cni (not configurable, as in containerd 1.6) and
 * runs a CNI GC on start that DELs every cached attachment of its network not among its pods: a fixture's
 * multus network therefore has a name of its own (`multusNetworkName`), so that a CRI-O started in one test never
 * collects another fixture's sandboxes.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { type Requirement, fileExists } from '../helpers/skip.ts';
import { RUNC_BIN, Runtime, childEnv, runOk } from './runtime.ts';

const CRIO_DIR = join(process.env.MULTUS_TS_CACHE_DIR || join(import.meta.dirname, '../../.cache'), 'crio');
const CRIO_BIN = join(CRIO_DIR, 'crio');
const PINNS_BIN = join(CRIO_DIR, 'pinns');
const CONMON_BIN = '/usr/bin/conmon';
const SKOPEO_BIN = '/usr/bin/skopeo';
const POLICY = '/etc/containers/policy.json';

export function crioRequirements(): Requirement[] {
  const build = 'bash test/runtime/build-crio.sh';
  return [
    fileExists(CRIO_BIN, `crio (${build})`),
    fileExists(PINNS_BIN, `pinns (${build})`),
    fileExists(CONMON_BIN, 'conmon (apt-get install conmon)'),
    fileExists(SKOPEO_BIN, 'skopeo, to put images into CRI-O (apt-get install skopeo)'),
    fileExists(POLICY, 'the containers signature policy (apt-get install golang-github-containers-common)'),
  ];
}

/** Where a CRI-O instance keeps its things: the fixture's dir, its socket, the CNI dirs and the namespaces dir. */
export interface CrioPlaces {
  dir: string;
  socket: string;
  sandboxImage: string;
  bin: string;
  conf: string;
  /** pinns' dir: the sandboxes' network namespaces are `<namespacesDir>/netns/<uuid>` */
  namespacesDir: string;
}

/** CRI-O's config.toml for `o` (the fixture's, and a kubelet node's: node.ts). */
export function crioConfig(o: CrioPlaces): string {
  const d = o.dir;
  return `[crio]
root = "${d}/root"
runroot = "${d}/runroot"
storage_driver = "overlay"
log_dir = "${d}/logs"
version_file = "${d}/version"
version_file_persist = "${d}/version-persist"
clean_shutdown_file = "${d}/clean.shutdown"
[crio.api]
listen = "${o.socket}"
stream_address = "127.0.0.1"
stream_port = "0"
[crio.runtime]
default_runtime = "runc"
cgroup_manager = "cgroupfs"
conmon_cgroup = "pod"
pinns_path = "${PINNS_BIN}"
namespaces_dir = "${o.namespacesDir}"
container_exits_dir = "${d}/exits"
container_attach_socket_dir = "${d}/attach"
apparmor_profile = ""
irqbalance_config_file = ""
irqbalance_config_restore_file = "disable"
log_level = "info"
[crio.runtime.runtimes.runc]
runtime_path = "${RUNC_BIN}"
runtime_root = "${d}/runc"
monitor_path = "${CONMON_BIN}"
monitor_cgroup = "pod"
[crio.image]
pause_image = "${o.sandboxImage}"
signature_policy = "${POLICY}"
signature_policy_dir = "${d}/policies"
[crio.network]
network_dir = "${o.conf}"
plugin_dirs = ["${o.bin}"]
[crio.metrics]
enable_metrics = false
[crio.nri]
enable_nri = false
`;
}

/** CRI-O's command line and environment for the config in `dir`. */
export function crioCommand(dir: string): { args: string[]; env: NodeJS.ProcessEnv } {
  return { args: [CRIO_BIN, '--config', join(dir, 'config.toml')], env: childEnv({ _CRIO_ROOTLESS: '1' }) };
}

/**
 * Copies each tag of an OCI archive's index into the CRI-O storage of `dir` as `<base>:<tag>` (skopeo); a tag that
 * is a whole reference (`registry/name:tag`) is kept as it is.
 */
export async function importIntoCrio(dir: string, tar: string, base: string): Promise<void> {
  const storage = `containers-storage:[overlay@${join(dir, 'root')}+${join(dir, 'runroot')}]`;
  const index = JSON.parse(await runOk('tar', ['-xOf', tar, './index.json'])) as {
    manifests: { annotations?: Record<string, string> }[];
  };
  for (const m of index.manifests) {
    const tag = m.annotations?.['org.opencontainers.image.ref.name'];
    if (!tag) continue;
    const target = tag.includes('/') ? tag : `${base}:${tag}`;
    // in a mount namespace of its own with a tmpfs over /var/lib: containers/image keeps a blob-info cache
    // in /var/lib/containers/cache (root's fixed path), which must not land on the machine
    await runOk('unshare', [
      '--mount',
      '--propagation',
      'private',
      'sh',
      '-c',
      'mount -t tmpfs tmpfs /var/lib && exec "$0" "$@"',
      SKOPEO_BIN,
      `--tmpdir=${dir}`,
      'copy',
      '--quiet',
      `oci-archive:${tar}:${tag}`,
      `${storage}${target}`,
    ]);
  }
}

export class CrioRuntime extends Runtime {
  override readonly kind = 'crio';

  override get socket(): string {
    return join(this.dir, 'crio.sock');
  }
  override get netnsDir(): string {
    return join(this.dir, 'ns', 'netns');
  }
  /** A name of its own for the fixture's multus network (see the file's comment). */
  get multusNetworkName(): string {
    return `multus-crio-${this.id}`;
  }

  protected override config(): string {
    const { bin, conf } = this.cniDirs();
    const places = { dir: this.dir, socket: this.socket, sandboxImage: this.sandboxImage, bin, conf };
    return crioConfig({ ...places, namespacesDir: join(this.dir, 'ns') });
  }

  protected override command(): { args: string[]; env: NodeJS.ProcessEnv } {
    return crioCommand(this.dir);
  }

  /** Copies each tag of an OCI archive's index into CRI-O's storage as `<base>:<tag>` (skopeo). */
  override async importImages(tar: string, base: string): Promise<void> {
    await importIntoCrio(this.dir, tar, base);
  }

  /** CRI-O's log lines that mention `text`. */
  async logLines(text: string): Promise<string[]> {
    return (await readFile(this.log, 'utf8').catch(() => '')).split('\n').filter((l) => l.includes(text));
  }
}

/** A prepared CRI-O fixture (dirs, namespace, bin dir): write the CNI conf, then `await rt.start()`. */
export function prepareCrio(): Promise<CrioRuntime> {
  return new CrioRuntime().prepare();
}
