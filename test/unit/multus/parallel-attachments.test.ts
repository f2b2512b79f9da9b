/**
 * `parallelAttachments` (docs/behaviour.md#parallel-attachments), in-process with FakeKube and a paced FakeExec:
 * which delegate calls overlap (read from the order of their starts and ends, never from a clock), the bound, the
 * same results, caches, network-status and events as serial, and a full rollback when one attachment fails.
 */
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { cmdAdd } from '../../../src/multus/commands/add.ts';
import { cmdCheck } from '../../../src/multus/commands/check.ts';
import { cmdDel } from '../../../src/multus/commands/del.ts';
import { parseMultusConf } from '../../../src/multus/conf.ts';
import { PARALLEL_ATTACHMENTS, attachmentSteps } from '../../../src/multus/overlap.ts';
import { explainAdd, formatExplanation } from '../../../src/multus/explain.ts';
import { silentLogger } from '../../../src/base/log.ts';
import { parseRequest } from '../../../src/cni/request.ts';
import { parseNetwork } from '../../../src/cni/network.ts';
import type { Exec, ExecOptions, ExecOutput } from '../../../src/cni/exec.ts';
import { boundedExec } from '../../../src/daemon/exec.ts';
import { kubeDeps, withContext } from '../../helpers/commands.ts';
import { FakeExec, cniErrorReply } from '../../helpers/fake-exec.ts';
import { FakeKube } from '../../helpers/fake-kube.ts';

const STATUS = 'k8s.v1.cni.cncf.io/network-status';

/** A FakeExec whose every call takes a few timer turns, logging `start`/`end` of each, and the most at once. */
class PacedExec extends FakeExec {
  readonly spans: string[] = [];
  running = 0;
  most = 0;
  /** Timer turns per call by plugin type (default 1): lets a later attachment finish first. */
  readonly turns: Record<string, number> = {};

  override async execPlugin(run: ExecOptions): Promise<ExecOutput> {
    const { path, env } = run;
    const tag = `${env.CNI_COMMAND} ${env.CNI_IFNAME}`;
    this.spans.push(`start ${tag}`);
    this.most = Math.max(this.most, ++this.running);
    for (let i = 0; i < (this.turns[path.slice('/fake/'.length)] ?? 1); i++) await new Promise((r) => setTimeout(r, 1));
    const out = await super.execPlugin(run);
    this.running--;
    this.spans.push(`end ${tag}`);
    return out;
  }
}

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'mts-par-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const SECONDARY = ['pa', 'pb', 'pc', 'pd', 'pe', 'pf', 'pg', 'ph', 'pi', 'pj'];

/** A pod with `n` NADs (types pa, pb, ...), the cluster network p0 from a file, and an auxiliary chain (px). */
function setup(parallel: boolean, n = 3, tag = parallel ? 'par' : 'ser', wrap = (e: Exec): Exec => e) {
  const base = join(dir, tag);
  const cniDir = join(base, 'cni');
  mkdirSync(join(base, 'aux'), { recursive: true });
  writeFileSync(join(base, 'cluster.conf'), JSON.stringify({ cniVersion: '1.0.0', name: 'cluster', type: 'p0' }));
  writeFileSync(join(base, 'aux', '10-x.conf'), JSON.stringify({ type: 'px' }));
  const kube = new FakeKube();
  const nads = SECONDARY.slice(0, n).map((type) => `net-${type}`);
  kube.addPod('ns1', 'pod1', 'uid-1', { 'k8s.v1.cni.cncf.io/networks': nads.join(',') });
  for (const type of SECONDARY) kube.addNad('ns1', `net-${type}`, { cniVersion: '1.0.0', type });
  const exec = new PacedExec('p0', 'px', 'passthru', ...SECONDARY);
  const conf = {
    cniVersion: '1.0.0',
    name: 'multus-cni-network',
    type: 'multus',
    kubeconfig: '/fake/kubeconfig',
    cniDir,
    binDir: '/opt/test/bin',
    clusterNetwork: join(base, 'cluster.conf'),
    auxiliaryCNIChainName: 'aux',
    ...(parallel ? { parallelAttachments: true } : {}),
  };
  const deps = kubeDeps(wrap(exec), kube);
  const call = (command: 'ADD' | 'DEL' | 'CHECK') => {
    const stdin = Buffer.from(JSON.stringify(conf));
    const env = {
      CNI_COMMAND: command,
      CNI_CONTAINERID: 'cid1',
      CNI_NETNS: '/var/run/netns/x',
      CNI_IFNAME: 'eth0',
      CNI_PATH: '/usr/lib/cni',
      CNI_ARGS:
        'IgnoreUnknown=1;K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=pod1;K8S_POD_INFRA_CONTAINER_ID=cid1;K8S_POD_UID=uid-1',
    };
    return withContext(parseRequest(command, env, stdin), parseMultusConf(stdin), deps);
  };
  return {
    kube,
    exec,
    cniDir,
    plan: () => explainAdd(parseMultusConf(Buffer.from(JSON.stringify(conf))), 'ns1', 'pod1', kube, silentLogger),
    add: () => cmdAdd(...call('ADD')),
    del: () => cmdDel(...call('DEL')),
    check: () => cmdCheck(...call('CHECK')),
  };
}

/** Every file under `root`, by path relative to it, with its bytes. */
function files(root: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (d: string): void => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p);
      else out[relative(root, p)] = readFileSync(p, 'utf8');
    }
  };
  walk(root);
  return out;
}

/** Position of a span line; fails the test when it is missing. */
function at(spans: string[], line: string): number {
  const i = spans.indexOf(line);
  expect(i, `${line} in ${spans.join(', ')}`).toBeGreaterThanOrEqual(0);
  return i;
}

/** True when every call of `a` started before any of them ended (they all overlap). */
function allOverlap(spans: string[], tags: string[]): boolean {
  const lastStart = Math.max(...tags.map((t) => at(spans, `start ${t}`)));
  const firstEnd = Math.min(...tags.map((t) => at(spans, `end ${t}`)));
  return lastStart < firstEnd;
}

/** True when each call of `tags` ended before the next one started. */
function oneAfterAnother(spans: string[], tags: string[]): boolean {
  return tags.every((t, i) => i === 0 || at(spans, `end ${tags[i - 1]}`) < at(spans, `start ${t}`));
}

const SECONDARIES = ['net1', 'net2', 'net3'];

describe('attachmentSteps', () => {
  const vlan = parseNetwork({ cniVersion: '1.0.0', name: 'v', type: 'vlan', master: 'net1', linkInContainer: true });
  const placed = [
    { source: 'cluster' },
    { source: 'default' },
    { source: 'selection', network: vlan },
    { source: 'selection' },
    {},
    { source: 'selection', network: vlan },
    { source: 'auxiliary' },
  ] as const;
  it.each([
    [false, false, [[0], [1], [2], [3], [4], [5], [6]]],
    [false, true, [[6], [5], [4], [3], [2], [1], [0]]],
    [true, false, [[0, 1, 3, 4], [2], [5], [6]]],
    [true, true, [[6], [5], [2], [4, 3, 1, 0]]],
  ])('parallel %s, reverse %s', (parallel, reverse, steps) => {
    expect(attachmentSteps([...placed], parallel, reverse)).toEqual(steps);
  });
});

describe('parallelAttachments', () => {
  it('ADD: the cluster network and the secondaries at once, then the auxiliary chain; serial one after another', async () => {
    const par = setup(true);
    await par.add();
    const s = par.exec.spans;
    expect(
      allOverlap(
        s,
        ['eth0', ...SECONDARIES].map((n) => `ADD ${n}`),
      ),
    ).toBe(true);
    const ends = ['eth0', ...SECONDARIES].map((n) => at(s, `end ADD ${n}`));
    expect(Math.max(...ends)).toBeLessThan(at(s, 'start ADD net4')); // the chain (passthru, px) is net4

    const ser = setup(false);
    await ser.add();
    const tags = ['eth0', ...SECONDARIES, 'net4'].map((n) => `ADD ${n}`);
    expect(oneAfterAnother(ser.exec.spans, tags)).toBe(true);
    expect(
      allOverlap(
        ser.exec.spans,
        SECONDARIES.map((n) => `ADD ${n}`),
      ),
    ).toBe(false);
  });

  it('ADD and DEL: a network whose link is inside the pod (linkInContainer) waits for the others', async () => {
    const par = setup(true);
    par.kube.addNad('ns1', 'net-pv', { cniVersion: '1.0.0', type: 'pv', master: 'net1', linkInContainer: true });
    par.kube.pods.get('ns1/pod1')!.metadata.annotations!['k8s.v1.cni.cncf.io/networks'] = 'net-pa,net-pv,net-pb';
    par.exec.known.add('pv');
    await par.add();
    const s = par.exec.spans;
    expect(allOverlap(s, ['ADD net1', 'ADD net3'])).toBe(true);
    expect(Math.max(at(s, 'end ADD net1'), at(s, 'end ADD net3'))).toBeLessThan(at(s, 'start ADD net2'));
    par.exec.spans.length = 0;
    await par.del();
    expect(at(par.exec.spans, 'end DEL net2')).toBeLessThan(
      Math.min(at(par.exec.spans, 'start DEL net1'), at(par.exec.spans, 'start DEL net3')),
    );
  });

  it('ADD: the same result, caches, network-status and events as serial, byte for byte', async () => {
    const ser = setup(false);
    const par = setup(true);
    // the last secondary finishes first in parallel: the order of everything written must not follow
    for (const [type, turns] of [
      ['pa', 6],
      ['pb', 3],
      ['pc', 1],
    ] as const)
      par.exec.turns[type] = turns;
    const [a, b] = [await ser.add(), await par.add()];
    expect(JSON.stringify(b)).toBe(JSON.stringify(a));
    expect(files(par.cniDir)).toEqual(files(ser.cniDir));
    expect(Object.keys(files(par.cniDir))).toHaveLength(6); // the scratch cache and five result caches
    const status = (t: ReturnType<typeof setup>) => t.kube.pods.get('ns1/pod1')!.metadata.annotations![STATUS];
    expect(status(par)).toBe(status(ser));
    expect(par.kube.events).toEqual(ser.kube.events);
    expect(par.kube.events.map((e) => e.message)).toEqual([
      'Add eth0 [10.1.0.2/24] from cluster',
      'Add net1 [10.1.0.2/24] from ns1/net-pa',
      'Add net2 [10.1.0.2/24] from ns1/net-pb',
      'Add net3 [10.1.0.2/24] from ns1/net-pc',
      'Add net4 [10.1.0.2/24] from aux',
    ]);
    expect([...par.exec.calls()].sort()).toEqual([...ser.exec.calls()].sort());
  });

  it('DEL: the auxiliary chain first, then the secondaries and the cluster network at once; nothing left', async () => {
    const par = setup(true);
    await par.add();
    par.exec.spans.length = 0;
    await par.del();
    const s = par.exec.spans;
    const together = ['eth0', ...SECONDARIES].map((n) => `DEL ${n}`);
    expect(allOverlap(s, together)).toBe(true);
    const starts = together.map((t) => at(s, `start ${t}`));
    expect(s.lastIndexOf('end DEL net4')).toBeLessThan(Math.min(...starts));
    expect(files(par.cniDir)).toEqual({});

    const ser = setup(false);
    await ser.add();
    ser.exec.spans.length = 0;
    await ser.del();
    expect(
      allOverlap(
        ser.exec.spans,
        SECONDARIES.map((n) => `DEL ${n}`),
      ),
    ).toBe(false);
    expect([...par.exec.calls()].sort()).toEqual([...ser.exec.calls()].sort());
  });

  it('CHECK: every attachment at once, failures named in order', async () => {
    const par = setup(true);
    await par.add();
    par.exec.spans.length = 0;
    par.exec.returns['pc CHECK'] = cniErrorReply(11, 'c is down');
    par.exec.returns['pa CHECK'] = cniErrorReply(11, 'a is down');
    par.exec.turns.pa = 4;
    const err = await par.check().then(
      () => undefined,
      (e: unknown) => e as { msg: string },
    );
    expect(
      allOverlap(
        par.exec.spans,
        ['eth0', ...SECONDARIES].map((n) => `CHECK ${n}`),
      ),
    ).toBe(true);
    expect(err?.msg).toMatch(/error checking net1 of network "net-pa".*a is down.*error checking net3 .*c is down/);
  });

  it('runs at most PARALLEL_ATTACHMENTS at once', async () => {
    const par = setup(true, PARALLEL_ATTACHMENTS + 1); // and the cluster network
    await par.add();
    expect(par.exec.most).toBe(PARALLEL_ATTACHMENTS);
    const ser = setup(false, 6);
    await ser.add();
    expect(ser.exec.most).toBe(1);
  });

  it("under the daemon's delegate bound of 1 (daemon/exec.ts) a parallel ADD and DEL finish, one plugin at a time", async () => {
    const par = setup(true, 3, 'bounded', (e) => boundedExec(e, 1));
    await par.add();
    await par.del();
    expect(par.exec.most).toBe(1);
    expect(files(par.cniDir)).toEqual({});
  });

  it('one of four failing rolls every attachment back: each started one is deleted, no cache is left', async () => {
    const par = setup(true);
    par.exec.returns['pb ADD'] = cniErrorReply(11, 'no address left');
    par.exec.turns.pb = 1;
    par.exec.turns.pc = 5; // still running when pb fails: waited for, then deleted too
    await expect(par.add()).rejects.toMatchObject({
      code: 11,
      msg: expect.stringContaining('error adding container to network "net-pb"'),
    });
    const dels = par.exec.calls().filter((c) => c.startsWith('DEL'));
    expect([...dels].sort()).toEqual(['DEL p0 eth0', 'DEL pa net1', 'DEL pb net2', 'DEL pc net3']);
    expect(par.exec.calls()).not.toContain('ADD passthru net4'); // the chain never started
    expect(files(par.cniDir)).toEqual({});
    expect(par.kube.events.map((e) => e.message)).toEqual([
      'Add eth0 [10.1.0.2/24] from cluster',
      'Add net1 [10.1.0.2/24] from ns1/net-pa',
    ]);
  });

  it('`multus plan` shows the steps with parallelAttachments, and none without', async () => {
    const x = await setup(true).plan();
    expect(x.steps).toEqual([['eth0', 'net1', 'net2', 'net3'], ['net4']]);
    expect(formatExplanation(x)).toContain(
      `  at once (parallelAttachments, at most ${PARALLEL_ATTACHMENTS} together): eth0 + net1 + net2 + net3, then net4`,
    );
    const serial = await setup(false).plan();
    expect(serial.steps).toBeUndefined();
    expect(formatExplanation(serial)).not.toContain('at once');
  });
});
