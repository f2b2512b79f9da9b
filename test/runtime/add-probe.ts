/**
 * The gap of a DaemonSet's roll, measured (multus-lane.ts): a CNI ADD probe repeated on the kubelet node while
 * Multus is replaced, recording when a pod's ADD would fail or come out without its NAD.
 *
 * Each probe does what containerd does for a sandbox: the first network config (by name) of the node's
 * /etc/cni/net.d, run by libcni (the end-to-end tier's driver, test/e2e/libcni-driver) with the node's
 * /opt/cni/bin and /var/lib/cni, in a fresh network namespace of the node, with the CNI_ARGS of an API pod whose
 * annotation requests the NAD (bound to a node that does not exist, so no kubelet runs it); the ADD is right when
 * the namespace then holds net1. Then DEL, as a runtime does whatever ADD did, retried every second while it fails
 * (kubelet retries a sandbox's teardown; the retries run beside the next probes), and the namespace is removed.
 */
import { readFile, readdir } from 'node:fs/promises';
import { join } from 'node:path';
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
  /** DEL succeeded, at last (a DEL that never succeeds leaks what ADD made) */
  delOk: boolean;
  /** DELs sent: a failed one is retried every second, as kubelet retries a sandbox's teardown, for 150 s */
  dels: number;
  /** when it started: before the roll, during it, or after the DaemonSet rolled out */
  phase: ProbePhase;
  /** what the probe's container still holds once DEL succeeded: host-local leases, multus cache files */
  leaked: string[];
}

export type ProbePhase = 'before' | 'during' | 'after';

export interface Gap {
  /** from the start of the first probe that was not ok to the start of the next ok one, summed over such runs */
  gapMs: number;
  /** of which the probes whose ADD failed (or found no config) */
  failedMs: number;
  /** of which the probes whose ADD succeeded without net1 (the pod would run without its NAD) */
  noNadMs: number;
  probes: number;
  longestProbeMs: number;
  /** probes whose DEL never succeeded */
  failedDels: number;
  /** probes whose DEL failed before it succeeded (the runtime's retries) */
  retriedDels: number;
  /** what probes left behind although DEL succeeded, with their phase */
  leaks: string[];
  /** the outcomes in order, runs collapsed: `ok x12, failed x3 (Unauthorized...), ok x4` */
  timeline: string;
}

const CONF_EXTS = ['.conf', '.conflist', '.json'];

export class AddProbe {
  private readonly results: ProbeResult[] = [];
  private readonly retries: Promise<void>[] = [];
  private running: Promise<void> | undefined;
  private stopped = false;
  private n = 0;
  /** the phase of the probes started from now on */
  phase: ProbePhase = 'before';

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

  /** Stops after the probe in hand and the DELs being retried; every result. */
  async stop(): Promise<ProbeResult[]> {
    this.stopped = true;
    await this.running;
    await Promise.all(this.retries);
    return [...this.results];
  }

  /** The last `count` results of the current phase were ok (the roll is over for the pods the node makes now). */
  settled(count: number): boolean {
    const tail = this.results.filter((r) => r.phase === this.phase).slice(-count);
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

  /** host-local leases and multus/libcni cache files that still name container `id`. */
  private async heldFor(id: string): Promise<string[]> {
    const held: string[] = [];
    const nets = this.node.path('/var/lib/cni/networks');
    for (const net of await readdir(nets).catch(() => [] as string[])) {
      for (const f of await readdir(join(nets, net)).catch(() => [] as string[])) {
        const text = await readFile(join(nets, net, f), 'utf8').catch(() => '');
        if (/^[0-9.]+$/.test(f) && text.split(/\s/)[0] === id) held.push(`${net}/${f}`);
      }
    }
    for (const d of ['/var/lib/cni/multus', '/var/lib/cni/multus/results', '/var/lib/cni/results']) {
      const names = await readdir(this.node.path(d)).catch(() => [] as string[]);
      held.push(...names.filter((n) => n.includes(id)).map((n) => join(d, n)));
    }
    return held;
  }

  private async once(): Promise<ProbeResult> {
    const startMs = Date.now();
    const i = this.n++;
    const netns = `mtsprobe${i}`;
    const id = `probe${i}x${startMs.toString(16)}`;
    const conf = await this.firstConf();
    const phase = this.phase;
    if (!conf)
      return { startMs, endMs: Date.now(), outcome: 'no-config', detail: '', delOk: true, dels: 0, phase, leaked: [] };
    const p = this.pod;
    const driver = (cmd: 'add' | 'del', file = conf) =>
      this.inNode([
        DRIVER_BIN,
        cmd,
        ...['--conf', `/etc/cni/net.d/${file}`, '--netns', `/run/netns/${netns}`, '--id', id, '--ifname', 'eth0'],
        '--args',
        `IgnoreUnknown=1;K8S_POD_NAMESPACE=${p.namespace};K8S_POD_NAME=${p.name};K8S_POD_INFRA_CONTAINER_ID=${id};K8S_POD_UID=${p.uid}`,
        ...['--cache-dir', '/var/lib/cni', '--path', '/opt/cni/bin'],
      ]);
    await this.inNode(['ip', 'netns', 'add', netns]);
    const add = await driver('add');
    let outcome: ProbeOutcome = 'failed';
    let detail = conf;
    if (add.code !== 0) {
      detail = (add.stdout || add.stderr).trim().slice(0, 160);
    } else {
      const links = await this.inNode(['ip', '-n', netns, '-o', 'link', 'show']);
      outcome = / net1[@:]/.test(links.stdout) ? 'ok' : 'no-net1';
    }
    const result: ProbeResult = { startMs, endMs: 0, outcome, detail, delOk: false, dels: 1, phase, leaked: [] };
    result.delOk = (await driver('del')).code === 0;
    result.endMs = Date.now();
    const teardown = async () => {
      const t0 = Date.now();
      while (!result.delOk && Date.now() - t0 < 150_000) {
        await new Promise((r) => setTimeout(r, 1000));
        result.dels++;
        // as containerd: the node's config of the moment (Go Multus thick removes its own when it stops)
        const now = await this.firstConf();
        result.delOk = now !== undefined && (await driver('del', now)).code === 0;
      }
      await this.inNode(['ip', 'netns', 'del', netns]);
      if (result.delOk) result.leaked = await this.heldFor(id);
    };
    if (result.delOk) await teardown();
    else this.retries.push(teardown());
    return result;
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
    retriedDels: results.filter((r) => r.dels > 1).length,
    leaks: results.filter((r) => r.leaked.length > 0).map((r) => `${r.phase} ${r.outcome}: ${r.leaked.join(' ')}`),
    timeline: runs.join(', '),
  };
}
