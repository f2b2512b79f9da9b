/**
 * The gap of a DaemonSet's roll, measured (multus-lane.ts): a CNI ADD probe repeated on the kubelet node while
 * Multus is replaced, recording when a pod's ADD would fail or come out without its NAD.
 *
 * Each probe does what containerd does for a sandbox: the first network config (by name) of the node's
 * /etc/cni/net.d, run by libcni (the end-to-end tier's driver, test/e2e/libcni-driver) with the node's
 * /opt/cni/bin and /var/lib/cni, in a fresh network namespace of the node, with the CNI_ARGS of an API pod whose
 * annotation requests the NAD (bound to a node that does not exist, so no kubelet runs it); the ADD is right when
 * the namespace then holds net1. Then DEL, as a runtime does whatever ADD did, and the namespace is removed.
 */
import { readdir } from 'node:fs/promises';
import type { PodRef } from '../e2e-k8s/world.ts';
import { DRIVER_BIN } from '../e2e/helpers.ts';
import type { NodeRuntime } from './node.ts';
import { run } from './runtime.ts';

export type ProbeOutcome = 'ok' | 'failed' | 'no-net1' | 'no-config';

export interface ProbeResult {
  startMs: number;
  endMs: number;
  outcome: ProbeOutcome;
  /** the driver's error (failed), the config used (otherwise) */
  detail: string;
  /** DEL's answer (a failed DEL leaks what ADD made) */
  delOk: boolean;
}

export interface Gap {
  /** from the start of the first probe that was not ok to the start of the next ok one, summed over such runs */
  gapMs: number;
  /** of which the probes whose ADD failed (or found no config) */
  failedMs: number;
  /** of which the probes whose ADD succeeded without net1 (the pod would run without its NAD) */
  noNadMs: number;
  probes: number;
  longestProbeMs: number;
  failedDels: number;
  /** the outcomes in order, runs collapsed: `ok x12, failed x3 (Unauthorized...), ok x4` */
  timeline: string;
}

const CONF_EXTS = ['.conf', '.conflist', '.json'];

export class AddProbe {
  private readonly results: ProbeResult[] = [];
  private running: Promise<void> | undefined;
  private stopped = false;
  private n = 0;

  constructor(
    private readonly node: NodeRuntime,
    private readonly pod: PodRef,
  ) {}

  /** Probes one after another until stop(). */
  start(): void {
    this.stopped = false;
    this.running = (async () => {
      while (!this.stopped) this.results.push(await this.once());
    })();
  }

  /** Stops after the probe in hand; every result so far. */
  async stop(): Promise<ProbeResult[]> {
    this.stopped = true;
    await this.running;
    return [...this.results];
  }

  /** The last `count` results were ok (the roll is over for the pods the node makes now). */
  settled(count: number): boolean {
    const tail = this.results.slice(-count);
    return tail.length === count && tail.every((r) => r.outcome === 'ok');
  }

  private inNode(args: string[], timeoutMs = 120_000) {
    return run('nsenter', [...this.node.nsenterArgs(), '--', ...args], { timeoutMs });
  }

  /** containerd's pick: the first *.conf, *.conflist or *.json of the conf dir by name. */
  private async firstConf(): Promise<string | undefined> {
    const names = (await readdir(this.node.path('/etc/cni/net.d')).catch(() => [] as string[])).sort();
    return names.find((n) => CONF_EXTS.some((e) => n.endsWith(e)));
  }

  private async once(): Promise<ProbeResult> {
    const startMs = Date.now();
    const i = this.n++;
    const netns = `mtsprobe${i}`;
    const id = `probe${i}x${startMs.toString(16)}`;
    const conf = await this.firstConf();
    if (!conf) return { startMs, endMs: Date.now(), outcome: 'no-config', detail: '', delOk: true };
    const p = this.pod;
    const driver = (cmd: 'add' | 'del') =>
      this.inNode([
        DRIVER_BIN,
        cmd,
        ...['--conf', `/etc/cni/net.d/${conf}`, '--netns', `/run/netns/${netns}`, '--id', id, '--ifname', 'eth0'],
        '--args',
        `IgnoreUnknown=1;K8S_POD_NAMESPACE=${p.namespace};K8S_POD_NAME=${p.name};K8S_POD_INFRA_CONTAINER_ID=${id};K8S_POD_UID=${p.uid}`,
        ...['--cache-dir', '/var/lib/cni', '--path', '/opt/cni/bin'],
      ]);
    await this.inNode(['ip', 'netns', 'add', netns]);
    try {
      const add = await driver('add');
      let outcome: ProbeOutcome = 'failed';
      let detail = conf;
      if (add.code !== 0) {
        detail = (add.stdout || add.stderr).trim().slice(0, 160);
      } else {
        const links = await this.inNode(['ip', '-n', netns, '-o', 'link', 'show']);
        outcome = / net1[@:]/.test(links.stdout) ? 'ok' : 'no-net1';
      }
      const del = await driver('del');
      return { startMs, endMs: Date.now(), outcome, detail, delOk: del.code === 0 };
    } finally {
      await this.inNode(['ip', 'netns', 'del', netns]);
    }
  }
}

/** The gap in a run of probe results (see Gap). */
export function gapOf(results: readonly ProbeResult[]): Gap {
  let gapMs = 0;
  let failedMs = 0;
  let noNadMs = 0;
  for (let i = 0; i < results.length; i++) {
    const r = results[i]!;
    if (r.outcome === 'ok') continue;
    const next = results[i + 1];
    const span = (next ? next.startMs : r.endMs) - r.startMs;
    gapMs += span;
    if (r.outcome === 'no-net1') noNadMs += span;
    else failedMs += span;
  }
  const runs: string[] = [];
  for (let i = 0; i < results.length;) {
    let j = i;
    while (j < results.length && results[j]!.outcome === results[i]!.outcome) j++;
    const r = results[i]!;
    runs.push(`${r.outcome} x${j - i}${r.outcome === 'failed' ? ` (${r.detail.slice(0, 100)})` : ''}`);
    i = j;
  }
  return {
    gapMs,
    failedMs,
    noNadMs,
    probes: results.length,
    longestProbeMs: Math.max(0, ...results.map((r) => r.endMs - r.startMs)),
    failedDels: results.filter((r) => !r.delOk).length,
    timeline: runs.join(', '),
  };
}
