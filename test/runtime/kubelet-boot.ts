/**
 * The kubelet node the DaemonSet tests run on (kubelet-suite.ts, kubelet-helm.test.ts): a kube-apiserver with
 * privileged pods allowed, a containerd node whose default network is a bridge (node.ts), the image `npm run image`
 * makes from the current build imported into containerd, the API tunnel into the node's namespace, the
 * controller-manager and scheduler, a registered kubelet and the DRA driver. Plus `until`, the tests' bounded poll.
 */
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { expect } from 'vitest';
import { type Cluster, startCluster } from '../k8s/cluster.ts';
import { ApiTunnel } from '../e2e-k8s/world.ts';
import { run as runProcess } from '../e2e/helpers.ts';
import { NodeRuntime } from './node.ts';
import { CTR_BIN, REPO_ROOT, imageEnv, runOk } from './runtime.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls `check` every 250 ms until it returns a value; fails with `what` and `why()` after `timeoutMs`. */
export async function until<T>(
  what: string,
  timeoutMs: number,
  check: () => Promise<T | undefined>,
  why: () => Promise<string>,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check().catch(() => undefined);
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`${what}: not after ${timeoutMs} ms\n${await why()}`);
    await sleep(250);
  }
}

export interface KubeletNode {
  cluster: Cluster;
  node: NodeRuntime;
  tunnel: ApiTunnel;
  /** The image reference containerd imported (the one the manifests and the chart name). */
  imageRef: string;
}

export interface BootOptions {
  /** The node's CRI runtime (default containerd). */
  runtime?: 'containerd' | 'crio';
  /** Start the tests' own DRA driver (test/runtime/dra-driver; default true). */
  draDriver?: boolean;
}

/** Boots the node; its default network `clusterNet` is a bridge `bridge` on `subnet`. */
export async function bootKubeletNode(
  clusterNet: string,
  bridge: string,
  subnet: string,
  o: BootOptions = {},
): Promise<KubeletNode> {
  // privileged: the resident daemon runs delegates in pods' namespaces, as on any node
  const cluster = await startCluster({ serviceAccountAdmission: true, apiserverArgs: ['--allow-privileged=true'] });
  const node = await new NodeRuntime({ runtime: o.runtime ?? 'containerd' }).prepare();
  await node.forDaemonSet(clusterNet, bridge, subnet);
  // the image, made from the current build/multus
  const imageDir = join(node.dir, 'image');
  const env = imageEnv(imageDir);
  const img = await runProcess('bash', [join(REPO_ROOT, 'scripts/image.sh')], { env, timeoutMs: 120_000 });
  expect(img.code, `npm run image: ${img.stderr}`).toBe(0);
  const tar = (await readdir(imageDir)).find((f) => f.endsWith('.tar'));
  expect(tar, `no image tarball in ${imageDir}`).toBeDefined();

  await node.start();
  const imageRef = await importImage(node, join(imageDir, tar!));
  const tunnel = new ApiTunnel();
  await tunnel.open(cluster, node.hostNs, node.dir);
  await node.startControlPlane(cluster);
  await node.startKubelet(cluster);
  if (o.draDriver ?? true) await node.startDraDriver(cluster);
  return { cluster, node, tunnel, imageRef };
}

/** Imports the image tarball into the node's runtime; the reference it got. */
async function importImage(node: NodeRuntime, tar: string): Promise<string> {
  if (node.kind === 'crio') {
    // the archive's index names the image in full (scripts/image.sh)
    const index = JSON.parse(await runOk('tar', ['-xOf', tar, './index.json'])) as {
      manifests: { annotations?: Record<string, string> }[];
    };
    const ref = index.manifests[0]?.annotations?.['org.opencontainers.image.ref.name'] ?? '';
    await node.importImages(tar, ref.slice(0, ref.lastIndexOf(':')));
    return ref;
  }
  const imported = await runOk(CTR_BIN, [
    '-a',
    node.socket,
    '-n',
    'k8s.io',
    'images',
    'import',
    '--all-platforms',
    tar,
  ]);
  return /unpacking (\S+) \(/.exec(imported)?.[1] ?? imported.trim();
}
