/**
 * The commands in-process, with the FakeExec seam and a real temp cniDir: call order, rollback, DEL
 * fallbacks and cache handling, without spawning anything.
 */
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { cmdAdd } from '../../../src/multus/commands/add.ts';
import { cmdCheck } from '../../../src/multus/commands/check.ts';
import type { TestSeams } from '../../helpers/commands.ts';
import { cmdDel } from '../../../src/multus/commands/del.ts';
import { cmdGc } from '../../../src/multus/commands/gc.ts';
import { cmdStatus } from '../../../src/multus/commands/status.ts';
import { parseMultusConf } from '../../../src/multus/conf.ts';
import { silentLogger } from '../../../src/base/log.ts';
import type { Command } from '../../../src/cni/request.ts';
import { parseRequest } from '../../../src/cni/request.ts';
import { withContext } from '../../helpers/commands.ts';
import { FakeExec, cniErrorReply, defaultResult } from '../../helpers/fake-exec.ts';

let dir: string;
let cniDir: string;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'mts-cmd-'));
  cniDir = join(dir, 'cni');
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const ARGS = 'IgnoreUnknown=1;K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=pod1;K8S_POD_INFRA_CONTAINER_ID=c1;K8S_POD_UID=u1';

function multusConf(extra: Record<string, unknown> = {}, cniVersion = '1.0.0'): Record<string, unknown> {
  return {
    cniVersion,
    name: 'multus-cni-network',
    type: 'multus',
    cniDir,
    binDir: '/opt/test/bin',
    delegates: [
      { cniVersion: '1.0.0', name: 'cluster', type: 'p0', capabilities: { portMappings: true } },
      {
        cniVersion: '1.0.0',
        name: 'chain',
        plugins: [{ type: 'p1' }, { type: 'p2', capabilities: { bandwidth: true } }],
      },
      { cniVersion: '1.0.0', name: 'third', type: 'p3' },
    ],
    runtimeConfig: { portMappings: [{ hostPort: 80, containerPort: 8080 }], bandwidth: { ingressRate: 1 } },
    ...extra,
  };
}

function request(
  command: Exclude<Command, 'VERSION'>,
  conf: Record<string, unknown>,
  env: Record<string, string> = {},
) {
  const stdin = Buffer.from(JSON.stringify(conf));
  const req = parseRequest(
    command,
    {
      CNI_COMMAND: command,
      CNI_CONTAINERID: 'cid1',
      CNI_NETNS: '/var/run/netns/test',
      CNI_IFNAME: 'eth0',
      CNI_PATH: '/usr/lib/cni',
      CNI_ARGS: ARGS,
      ...env,
    },
    stdin,
  );
  return { req, conf: parseMultusConf(stdin) };
}

function deps(exec: FakeExec, exists = true): TestSeams {
  return {
    exec,
    log: silentLogger,
    readiness: { exists: async () => exists, sleep: async () => {} },
    env: { PATH: '/usr/bin' },
    kube: async () => undefined,
    clock: { now: () => 0, sleep: async () => {} },
  };
}

describe('ADD', () => {
  it("runs every delegate in order with its ifname, its own runtimeConfig and the chain's prevResult", async () => {
    const exec = new FakeExec('p0', 'p1', 'p2', 'p3');
    const { req, conf } = request('ADD', multusConf({}, '0.4.0'));
    const result = await cmdAdd(...withContext(req, conf, deps(exec)));
    expect(exec.calls()).toEqual(['ADD p0 eth0', 'ADD p1 net1', 'ADD p2 net1', 'ADD p3 net2']);
    const [p0, p1, p2, p3] = exec.received;
    expect(p0!.stdin.runtimeConfig).toEqual({ portMappings: [{ hostPort: 80, containerPort: 8080 }] });
    expect(p1!.stdin.runtimeConfig).toBeUndefined();
    expect(p2!.stdin.runtimeConfig).toEqual({ bandwidth: { ingressRate: 1 } });
    expect(p2!.stdin.prevResult).toMatchObject({ cniVersion: '1.0.0', interfaces: [{ name: 'net1' }] });
    expect(p2!.stdin.name).toBe('chain');
    expect(p3!.path).toBe('/opt/test/bin:/usr/lib/cni');
    expect(p3!.args).toBe(ARGS.replace('IgnoreUnknown=1', 'IgnoreUnknown=true'));
    // the cluster network's result in the multus config's version
    expect(result.cniVersion).toBe('0.4.0');
    expect(result.ips).toEqual([{ version: '4', address: '10.1.0.2/24', gateway: '10.1.0.1', interface: 0 }]);
    expect(readdirSync(join(cniDir, 'results')).sort()).toEqual([
      'chain-cid1-net1',
      'cluster-cid1-eth0',
      'third-cid1-net2',
    ]);
    expect(existsSync(join(cniDir, 'cid1'))).toBe(true);
  });

  it("logs a delegate's stderr through the call's one logger (libcni takes the context's, not a copy)", async () => {
    const exec = new FakeExec('p0', 'p1', 'p2', 'p3');
    exec.returns['p3 ADD'] = (call) => ({
      stdout: Buffer.from(JSON.stringify(defaultResult(call))),
      stderr: Buffer.from('hello\n'),
    });
    const lines: string[] = [];
    const log = { ...silentLogger, verbose: (msg: string) => void lines.push(msg) };
    const { req, conf } = request('ADD', multusConf());
    await cmdAdd(...withContext(req, conf, { ...deps(exec), log }));
    expect(lines).toContain('p3 ADD stderr: hello');
  });

  it("rolls back the failed and every earlier attachment in reverse, keeps the delegate's code, leaves no cache", async () => {
    const exec = new FakeExec('p0', 'p1', 'p2', 'p3');
    exec.returns['p2 ADD'] = cniErrorReply(11, 'busy, try again');
    const { req, conf } = request('ADD', multusConf());
    const error = await cmdAdd(...withContext(req, conf, deps(exec))).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 11 });
    expect((error as { msg: string }).msg).toBe(
      '[ns1/pod1/u1:chain]: error adding container to network "chain": plugin type="p2" failed (add): busy, try again',
    );
    expect(exec.calls()).toEqual([
      'ADD p0 eth0',
      'ADD p1 net1',
      'ADD p2 net1',
      'DEL p2 net1',
      'DEL p1 net1',
      'DEL p0 eth0',
    ]);
    expect(readdirSync(join(cniDir, 'results'))).toEqual([]);
    expect(existsSync(join(cniDir, 'cid1'))).toBe(false);
  });

  it("keeps the scratch cache when a rollback DEL fails, so the runtime's DEL can finish", async () => {
    const exec = new FakeExec('p0', 'p1', 'p2', 'p3');
    exec.returns['p3 ADD'] = cniErrorReply(7, 'bad');
    exec.returns['p0 DEL'] = cniErrorReply(999, 'cannot');
    const { req, conf } = request('ADD', multusConf());
    await expect(cmdAdd(...withContext(req, conf, deps(exec)))).rejects.toMatchObject({ code: 7 });
    expect(existsSync(join(cniDir, 'cid1'))).toBe(true);
    expect(readdirSync(join(cniDir, 'results'))).toEqual(['cluster-cid1-eth0']);
  });
});

describe('DEL', () => {
  async function added(exec: FakeExec, extra: Record<string, unknown> = {}) {
    const { req, conf } = request('ADD', multusConf(extra));
    await cmdAdd(...withContext(req, conf, deps(exec)));
    exec.received.length = 0;
  }

  it('deletes every attachment in reverse with the cached prevResult, removes all caches, and is idempotent', async () => {
    const exec = new FakeExec('p0', 'p1', 'p2', 'p3');
    await added(exec);
    const { req, conf } = request('DEL', multusConf());
    await cmdDel(...withContext(req, conf, deps(exec)));
    expect(exec.calls()).toEqual(['DEL p3 net2', 'DEL p2 net1', 'DEL p1 net1', 'DEL p0 eth0']);
    expect(exec.received[0]!.stdin.prevResult).toMatchObject({ interfaces: [{ name: 'net2' }] });
    expect(readdirSync(join(cniDir, 'results'))).toEqual([]);
    expect(existsSync(join(cniDir, 'cid1'))).toBe(false);
    await cmdDel(...withContext(req, conf, deps(exec)));
  });

  it('keeps going past failures and names every failed attachment', async () => {
    const exec = new FakeExec('p0', 'p1', 'p2', 'p3');
    await added(exec);
    exec.returns['p3 DEL'] = cniErrorReply(999, 'p3 broke');
    exec.returns['p0 DEL'] = cniErrorReply(999, 'p0 broke');
    const { req, conf } = request('DEL', multusConf());
    const error = await cmdDel(...withContext(req, conf, deps(exec))).catch((e: unknown) => e);
    expect(exec.calls()).toEqual(['DEL p3 net2', 'DEL p2 net1', 'DEL p1 net1', 'DEL p0 eth0']);
    expect((error as { msg: string }).msg).toMatch(/network "third".*p3 broke; .*network "cluster".*p0 broke/);
    // failed attachments keep their result cache, so a retry still finds them (the scratch cache is gone: compat)
    expect(readdirSync(join(cniDir, 'results')).sort()).toEqual(['cluster-cid1-eth0', 'third-cid1-net2']);
    exec.returns['p3 DEL'] = {};
    exec.returns['p0 DEL'] = {};
    exec.received.length = 0;
    await cmdDel(...withContext(req, conf, deps(exec)));
    expect(readdirSync(join(cniDir, 'results'))).toEqual([]);
  });

  it("reads each result cache once: a teardown gets the plan's read, not a second one", async () => {
    // The plan lists the container's caches under its lock; prevResult and "was it attached" come from that one
    // read, so what a teardown's delegate then does to another attachment's file is not what that attachment had.
    const exec = new FakeExec('p0', 'p1', 'p2', 'p3');
    await added(exec);
    const cluster = join(cniDir, 'results', 'cluster-cid1-eth0');
    exec.returns['p3 DEL'] = () => {
      writeFileSync(cluster, '');
      return {};
    };
    const { req, conf } = request('DEL', multusConf());
    await cmdDel(...withContext(req, conf, deps(exec)));
    expect(exec.calls()).toEqual(['DEL p3 net2', 'DEL p2 net1', 'DEL p1 net1', 'DEL p0 eth0']);
    expect(exec.received[3]!.stdin.prevResult).toMatchObject({ interfaces: [{ name: 'eth0' }] });
    expect(existsSync(cluster)).toBe(false);
  });

  it('with retryDeleteOnError keeps the scratch cache after a failure', async () => {
    const exec = new FakeExec('p0', 'p1', 'p2', 'p3');
    await added(exec, { retryDeleteOnError: true });
    exec.returns['p1 DEL'] = cniErrorReply(999, 'no');
    const { req, conf } = request('DEL', multusConf({ retryDeleteOnError: true }));
    await expect(cmdDel(...withContext(req, conf, deps(exec)))).rejects.toMatchObject({ code: 999 });
    expect(existsSync(join(cniDir, 'cid1'))).toBe(true);
  });

  it('tears everything down from the config and the result caches when the scratch cache is truncated', async () => {
    const exec = new FakeExec('p0', 'p1', 'p2', 'p3');
    await added(exec);
    writeFileSync(join(cniDir, 'cid1'), '[{"Conf":{"cniVer');
    const { req, conf } = request('DEL', multusConf());
    await cmdDel(...withContext(req, conf, deps(exec)));
    expect(exec.calls()).toEqual(['DEL p3 net2', 'DEL p2 net1', 'DEL p1 net1', 'DEL p0 eth0']);
    expect(existsSync(join(cniDir, 'cid1'))).toBe(false);
  });

  it('recovers an attachment that only its result cache knows (config changed since ADD)', async () => {
    const exec = new FakeExec('p0', 'p1', 'p2', 'p3');
    await added(exec);
    rmSync(join(cniDir, 'cid1'));
    const conf = multusConf();
    conf.delegates = (conf.delegates as unknown[]).slice(0, 1);
    const { req, conf: parsed } = request('DEL', conf);
    await cmdDel(...withContext(req, parsed, deps(exec)));
    expect(exec.calls().sort()).toEqual(['DEL p0 eth0', 'DEL p1 net1', 'DEL p2 net1', 'DEL p3 net2']);
    expect(readdirSync(join(cniDir, 'results'))).toEqual([]);
  });

  it('tears down an attachment whose result cache a power loss left empty, from the scratch cache (reliability.md)', async () => {
    // Result caches are written without fsync (as libcni writes them): after a power loss one may be there but
    // empty. The scratch cache names that attachment, so DEL runs its DEL without a prevResult and drops the file.
    const exec = new FakeExec('p0', 'p1', 'p2', 'p3');
    await added(exec);
    exec.received.length = 0;
    writeFileSync(join(cniDir, 'results', 'third-cid1-net2'), '');
    const { req, conf } = request('DEL', multusConf());
    await cmdDel(...withContext(req, conf, deps(exec)));
    expect(exec.calls()).toEqual(['DEL p3 net2', 'DEL p2 net1', 'DEL p1 net1', 'DEL p0 eth0']);
    expect(exec.received[0]!.stdin.prevResult).toBeUndefined();
    expect(exec.received[3]!.stdin.prevResult).toBeDefined();
    expect(readdirSync(join(cniDir, 'results'))).toEqual([]);
    expect(existsSync(join(cniDir, 'cid1'))).toBe(false);
  });

  it('fails with code 6 naming a corrupt result cache that nothing else explains', async () => {
    const exec = new FakeExec('p0', 'p1', 'p2', 'p3');
    await added(exec);
    rmSync(join(cniDir, 'cid1'));
    writeFileSync(join(cniDir, 'results', 'third-cid1-net2'), '{"kind":"cniCacheV1","contai');
    const conf = multusConf();
    conf.delegates = (conf.delegates as unknown[]).slice(0, 1);
    const { req, conf: parsed } = request('DEL', conf);
    const error = await cmdDel(...withContext(req, parsed, deps(exec))).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 6 });
    expect((error as { msg: string }).msg).toContain('third-cid1-net2');
  });
});

describe('CHECK', () => {
  it('checks every recorded attachment in order with its cached result', async () => {
    const exec = new FakeExec('p0', 'p1', 'p2', 'p3');
    const add = request('ADD', multusConf());
    await cmdAdd(...withContext(add.req, add.conf, deps(exec)));
    exec.received.length = 0;
    const { req, conf } = request('CHECK', multusConf());
    await cmdCheck(...withContext(req, conf, deps(exec)));
    expect(exec.calls()).toEqual(['CHECK p0 eth0', 'CHECK p1 net1', 'CHECK p2 net1', 'CHECK p3 net2']);
    expect(exec.received[3]!.stdin.prevResult).toMatchObject({ interfaces: [{ name: 'net2' }] });
  });

  it('skips networks below 0.4.0 and reports a failing one', async () => {
    const exec = new FakeExec('p0', 'p1', 'p2', 'p3');
    const conf = multusConf();
    (conf.delegates as Record<string, unknown>[])[2]!.cniVersion = '0.3.1';
    const add = request('ADD', conf);
    await cmdAdd(...withContext(add.req, add.conf, deps(exec)));
    exec.received.length = 0;
    exec.returns['p0 CHECK'] = cniErrorReply(999, 'eth0 is gone');
    const { req, conf: parsed } = request('CHECK', conf);
    await expect(cmdCheck(...withContext(req, parsed, deps(exec)))).rejects.toMatchObject({
      msg: expect.stringContaining('eth0 is gone'),
    });
    expect(exec.calls()).toEqual(['CHECK p0 eth0', 'CHECK p1 net1', 'CHECK p2 net1']);
  });
});

describe('STATUS and GC', () => {
  it("STATUS asks the cluster network and keeps its code and message unchanged (Multus' test compares it exactly)", async () => {
    const exec = new FakeExec('p0', 'p1', 'p2', 'p3');
    const conf = multusConf({}, '1.1.0');
    (conf.delegates as Record<string, unknown>[])[0]!.cniVersion = '1.1.0';
    exec.returns['p0 STATUS'] = cniErrorReply(50, 'not ready');
    const { req, conf: parsed } = request('STATUS', conf);
    await expect(cmdStatus(...withContext(req, parsed, deps(exec)))).rejects.toMatchObject({
      code: 50,
      msg: 'not ready',
    });
    expect(exec.calls()).toEqual(['STATUS p0 ']);
  });

  it('GC deletes the attachments of containers the runtime no longer lists, and keeps the others', async () => {
    const exec = new FakeExec('p0', 'p1', 'p2', 'p3');
    for (const id of ['cid1', 'cid2']) {
      const add = request('ADD', multusConf({}, '1.1.0'), { CNI_CONTAINERID: id });
      await cmdAdd(...withContext(add.req, add.conf, deps(exec)));
    }
    exec.received.length = 0;
    const conf = multusConf({ 'cni.dev/valid-attachments': [{ containerID: 'cid2', ifname: 'eth0' }] }, '1.1.0');
    const { req, conf: parsed } = request('GC', conf);
    await cmdGc(...withContext(req, parsed, deps(exec)));
    expect(exec.calls().sort()).toEqual(['DEL p0 eth0', 'DEL p1 net1', 'DEL p2 net1', 'DEL p3 net2']);
    expect(exec.received.every((c) => c.stdin.prevResult !== undefined)).toBe(true);
    expect(readdirSync(join(cniDir, 'results')).sort()).toEqual([
      'chain-cid2-net1',
      'cluster-cid2-eth0',
      'third-cid2-net2',
    ]);
    expect(existsSync(join(cniDir, 'cid1'))).toBe(false);
    expect(existsSync(join(cniDir, 'cid2'))).toBe(true);
  });

  it('GC with the list null (libcni, a runtime with no pods: CRI-O on start) deletes every attachment', async () => {
    const exec = new FakeExec('p0', 'p1', 'p2', 'p3');
    const add = request('ADD', multusConf({}, '1.1.0'), { CNI_CONTAINERID: 'cid1' });
    await cmdAdd(...withContext(add.req, add.conf, deps(exec)));
    exec.received.length = 0;
    const nulls = { 'cni.dev/valid-attachments': null, 'cni.dev/attachments': null };
    const { req, conf } = request('GC', multusConf(nulls, '1.1.0'));
    await cmdGc(...withContext(req, conf, deps(exec)));
    expect(exec.calls().sort()).toEqual(['DEL p0 eth0', 'DEL p1 net1', 'DEL p2 net1', 'DEL p3 net2']);
    expect(readdirSync(join(cniDir, 'results'))).toEqual([]);
    expect(existsSync(join(cniDir, 'cid1'))).toBe(false);
  });

  it('GC also deletes an attachment of a stale container that only its scratch cache lists (an ADD cut short)', async () => {
    const exec = new FakeExec('p0', 'p1', 'p2', 'p3');
    const add = request('ADD', multusConf({}, '1.1.0'));
    await cmdAdd(...withContext(add.req, add.conf, deps(exec)));
    // killed while "third" ran: its plugin may hold something, but libcni never wrote its result cache
    rmSync(join(cniDir, 'results', 'third-cid1-net2'));
    exec.received.length = 0;
    const { req, conf } = request('GC', multusConf({ 'cni.dev/valid-attachments': [] }, '1.1.0'));
    await cmdGc(...withContext(req, conf, deps(exec)));
    expect(
      exec
        .calls()
        .filter((c) => c.startsWith('DEL'))
        .sort(),
    ).toEqual(['DEL p0 eth0', 'DEL p1 net1', 'DEL p2 net1', 'DEL p3 net2']);
    const third = exec.received.find((c) => c.type === 'p3')!;
    expect([third.args, third.path]).toEqual([expect.stringContaining('K8S_POD_NAME=pod1'), expect.any(String)]);
    expect(existsSync(join(cniDir, 'cid1'))).toBe(false);
  });

  it("GC without the runtime's list deletes nothing", async () => {
    const exec = new FakeExec('p0', 'p1', 'p2', 'p3');
    const add = request('ADD', multusConf({}, '1.1.0'));
    await cmdAdd(...withContext(add.req, add.conf, deps(exec)));
    exec.received.length = 0;
    const { req, conf } = request('GC', multusConf({}, '1.1.0'));
    await cmdGc(...withContext(req, conf, deps(exec)));
    expect(exec.received).toEqual([]);
    expect(readdirSync(join(cniDir, 'results'))).toHaveLength(3);
  });
});
