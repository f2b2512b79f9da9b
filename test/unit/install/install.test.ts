/**
 * `multus install` in-process on a node in a temp dir, one scripted action per tick: the copies, the
 * kubeconfig and its rotation, the generated file for each master situation (single config, conflist, several
 * masters, master appears late, changes, is removed, our own file present), cleanup on exit, and every failure
 * naming its path with nothing half-written left.
 */
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BRIDGE_031, ENV, FLANNEL, ls, makeNode, runScripted } from '../../helpers/install.ts';
import type { NodeToken, NodeTokenRequest } from '../../../src/install/node-token.ts';
import type { DeletionState } from '../../../src/install/uninstall.ts';
import { parseInstallArgs } from '../../../src/install/options.ts';

/** A launcher's file as payloads.ts reads it: anything, then the 64-byte trailer naming the id it carries. */
const fakeLauncher = (id: string): Buffer => {
  const trailer = Buffer.alloc(64);
  Buffer.from(id, 'hex').copy(trailer, 16);
  Buffer.from('multus-ts-bun\x00\x00\x01', 'latin1').copy(trailer, 48);
  return Buffer.concat([Buffer.from('launcher'), trailer]);
};
const b64 = (s: string): string => Buffer.from(s).toString('base64');
const conf = (dir: string, name: string): Record<string, unknown> =>
  JSON.parse(readFileSync(join(dir, name), 'utf8')) as Record<string, unknown>;
const delegateName = (c: Record<string, unknown>): unknown =>
  ((c.plugins ? (c.plugins as Array<Record<string, unknown>>)[0] : c)!.delegates as Array<{ name: string }>)[0]!.name;

describe('multus install', () => {
  it('copies the executables atomically, writes the kubeconfig (0600) and the conflist (0600)', async () => {
    const n = makeNode();
    writeFileSync(join(n.src, 'passthru'), 'passthru-binary');
    writeFileSync(join(n.src, 'multus-shim'), 'shim-binary');
    writeFileSync(join(n.src, 'multus'), fakeLauncher('0123456789abcdef'));
    writeFileSync(join(n.src, '.multus-bun-0123456789abcdef'), 'bun-executable');
    writeFileSync(join(n.src, '.multus-bun-00000000000000ff'), 'another build: not copied');
    writeFileSync(join(n.netd, '10-flannel.conflist'), FLANNEL);
    const r = await runScripted(n.args, []);
    expect(r.error).toBeNull();
    // the launcher (multus) and the Bun executable it starts (docs/build.md, "The launcher")
    expect(ls(n.bin)).toEqual(['.multus-bun-0123456789abcdef', 'multus', 'multus-shim', 'passthru']);
    expect(readFileSync(join(n.bin, '.multus-bun-0123456789abcdef'), 'utf8')).toBe('bun-executable');
    expect(readFileSync(join(n.bin, 'multus-shim'), 'utf8')).toBe('shim-binary');
    expect(statSync(join(n.bin, 'multus')).mode & 0o777).toBe(0o755);
    expect(ls(n.netd)).toEqual(['00-multus.conflist', '10-flannel.conflist', 'multus.d']);
    expect(statSync(join(n.netd, '00-multus.conflist')).mode & 0o777).toBe(0o600);
    const kc = join(n.netd, 'multus.d', 'multus.kubeconfig');
    expect(statSync(kc).mode & 0o777).toBe(0o600);
    expect(statSync(join(n.netd, 'multus.d')).mode & 0o777).toBe(0o700);
    expect(readFileSync(kc, 'utf8')).toContain('server: https://10.96.0.1:443\n');
    expect(readFileSync(kc, 'utf8')).toContain('token: "token-1"\n');
    expect(existsSync(n.mnetd)).toBe(true);
    expect(conf(n.netd, '00-multus.conflist')).toMatchObject({ plugins: [{ type: 'multus', confDir: n.mnetd }] });
    // the kubeconfig first: the copies take seconds during which an upgrade's node has only the old pod's token
    expect(r.logs.findIndex((l) => l.startsWith('kubeconfig is created'))).toBe(0);
    expect(r.logs.findIndex((l) => l.startsWith('multus binary'))).toBeGreaterThan(0);
  });

  it('over an older build, removes the Bun executables no launcher in the bin dir carries (docs/build.md)', async () => {
    const n = makeNode();
    writeFileSync(join(n.src, 'multus'), fakeLauncher('0123456789abcdef'));
    writeFileSync(join(n.src, '.multus-bun-0123456789abcdef'), 'new');
    writeFileSync(join(n.netd, '10-flannel.conflist'), FLANNEL);
    writeFileSync(join(n.bin, 'multus'), fakeLauncher('aaaaaaaaaaaaaaaa')); // the older build
    writeFileSync(join(n.bin, 'other-launcher'), fakeLauncher('bbbbbbbbbbbbbbbb')); // another build, still there
    writeFileSync(join(n.bin, 'bridge'), 'a plugin');
    const left = [
      'aaaaaaaaaaaaaaaa',
      'bbbbbbbbbbbbbbbb',
      'cccccccccccccccc',
      'aaaaaaaaaaaaaaaa.tmp',
      'dddddddddddddddd.tmp-42',
    ];
    for (const f of [...left, 'bbbbbbbbbbbbbbbb.tmp']) writeFileSync(join(n.bin, `.multus-bun-${f}`), 'old');
    writeFileSync(join(n.bin, '.multus-bun.lock'), '');
    const r = await runScripted([...n.args, '--install-binary-only'], []);
    expect(r.error).toBeNull();
    expect(ls(n.bin)).toEqual([
      '.multus-bun-0123456789abcdef',
      '.multus-bun-bbbbbbbbbbbbbbbb',
      '.multus-bun-bbbbbbbbbbbbbbbb.tmp',
      '.multus-bun.lock',
      'bridge',
      'multus',
      'other-launcher',
      'passthru',
    ]);
  });

  it('copies the running executable when the default --multus-bin-file is missing', async () => {
    const n = makeNode();
    writeFileSync(join(n.netd, '10.conf'), BRIDGE_031);
    const args = n.args.filter((a) => !a.startsWith('--multus-bin-file'));
    writeFileSync(join(n.root, 'running'), 'the running executable');
    const r = await runScripted(args, [], join(n.root, 'running'));
    expect(r.error).toBeNull();
    expect(readFileSync(join(n.bin, 'multus'), 'utf8')).toBe('the running executable');
  });

  it('only copies the executables with --install-binary-only, and returns', async () => {
    const n = makeNode();
    writeFileSync(join(n.src, 'multus-shim'), 'shim-binary');
    const r = await runScripted(
      [...n.args, '--install-binary-only', `--cni-conf-dir=${n.root}/none`],
      [() => expect.fail('--install-binary-only must not wait')],
    );
    expect(r.error).toBeNull();
    expect(ls(n.bin)).toEqual(['multus', 'multus-shim', 'passthru']);
    // no passthru beside the executable (the image): passthru is multus under that name, a hard link
    expect(statSync(join(n.bin, 'passthru')).ino).toBe(statSync(join(n.bin, 'multus')).ino);
    expect(ls(n.netd)).toEqual([]);
  });

  it("with --skip-multus-conf keeps only the kubeconfig current (the resident mode's sidecar)", async () => {
    const n = makeNode();
    writeFileSync(join(n.netd, '10-flannel.conflist'), FLANNEL);
    const kc = join(n.netd, 'multus.d', 'multus.kubeconfig');
    const args = [...n.args, '--skip-multus-conf', '--skip-multus-binary-copy', '--cleanup-config-on-exit'];
    const r = await runScripted(args, [
      () => writeFileSync(join(n.sa, 'token'), 'token-2'),
      () => expect(readFileSync(kc, 'utf8')).toContain('token: "token-2"'),
    ]);
    expect(r.error).toBeNull();
    expect(ls(n.netd)).toEqual(['10-flannel.conflist', 'multus.d']);
    expect(ls(n.bin)).toEqual([]);
  });

  it('writes 00-multus.conf for a pre-1.0 master, picking the first of several masters', async () => {
    const n = makeNode();
    writeFileSync(join(n.netd, '20-flannel.conflist'), FLANNEL);
    writeFileSync(join(n.netd, '10-bridge.conf'), BRIDGE_031);
    writeFileSync(join(n.netd, '05-notes.json'), '{}');
    const r = await runScripted(n.args, []);
    expect(r.error).toBeNull();
    expect(delegateName(conf(n.netd, '00-multus.conf'))).toBe('br');
    expect(existsSync(join(n.netd, '00-multus.conflist'))).toBe(false);
  });

  it('never takes its own file as the master', async () => {
    const n = makeNode();
    writeFileSync(join(n.netd, '00-multus.conf'), JSON.stringify({ cniVersion: '0.3.1', name: 'old', type: 'multus' }));
    writeFileSync(join(n.netd, '10-bridge.conf'), BRIDGE_031);
    const r = await runScripted(n.args, []);
    expect(r.error).toBeNull();
    expect(delegateName(conf(n.netd, '00-multus.conf'))).toBe('br');
  });

  it('takes --multus-master-cni-file-name over the first file', async () => {
    const n = makeNode();
    writeFileSync(join(n.netd, '10-bridge.conf'), BRIDGE_031);
    writeFileSync(join(n.netd, '20-flannel.conflist'), FLANNEL);
    const r = await runScripted([...n.args, '--multus-master-cni-file-name=20-flannel.conflist'], []);
    expect(r.error).toBeNull();
    expect(delegateName(conf(n.netd, '00-multus.conflist'))).toBe('cbr0');
  });

  it('waits for a master that appears late', async () => {
    const n = makeNode();
    const r = await runScripted(n.args, [
      () => expect(ls(n.netd)).toEqual(['multus.d']),
      () => writeFileSync(join(n.netd, '10-flannel.conflist'), FLANNEL),
      () => expect(ls(n.netd)).toContain('00-multus.conflist'),
    ]);
    expect(r.error).toBeNull();
    expect(r.logs.filter((l) => l.startsWith('waiting for a master'))).toHaveLength(1);
  });

  it('regenerates when the master changes (and drops the file of the other name)', async () => {
    const n = makeNode();
    const master = join(n.netd, '10-net.conflist');
    writeFileSync(master, FLANNEL);
    const r = await runScripted(n.args, [
      () => writeFileSync(master, BRIDGE_031),
      () => {
        expect(ls(n.netd)).toEqual(['00-multus.conf', '10-net.conflist', 'multus.d']);
        expect(delegateName(conf(n.netd, '00-multus.conf'))).toBe('br');
      },
    ]);
    expect(r.error).toBeNull();
    expect(r.logs).toContain('master config changed - recreating multus config');
  });

  it('keeps the last file while the master is gone, takes the next one, restores a deleted own file', async () => {
    const n = makeNode();
    writeFileSync(join(n.netd, '10-flannel.conflist'), FLANNEL);
    const r = await runScripted(n.args, [
      () => rmSync(join(n.netd, '10-flannel.conflist')),
      () => expect(delegateName(conf(n.netd, '00-multus.conflist'))).toBe('cbr0'),
      () => writeFileSync(join(n.netd, '20-bridge.conf'), BRIDGE_031),
      () => {
        expect(ls(n.netd)).toEqual(['00-multus.conf', '20-bridge.conf', 'multus.d']);
        rmSync(join(n.netd, '00-multus.conf'));
      },
      () => expect(ls(n.netd)).toContain('00-multus.conf'),
    ]);
    expect(r.error).toBeNull();
    expect(r.logs).toContain('master CNI config has been deleted: waiting for its restoration...');
  });

  it("our file renamed away by another CNI (Cilium's .cilium_bak): written again, a warning in the log and a node event with the kubeconfig", async () => {
    const n = makeNode();
    writeFileSync(join(n.netd, '05-cilium.conflist'), FLANNEL);
    const events: { kubeconfig: string; reason: string; message: string }[] = [];
    const own = join(n.netd, '00-multus.conflist');
    const r = await runScripted(
      n.args,
      [
        () => renameSync(own, `${own}.cilium_bak`),
        () =>
          expect(ls(n.netd)).toEqual([
            '00-multus.conflist',
            '00-multus.conflist.cilium_bak',
            '05-cilium.conflist',
            'multus.d',
          ]),
        () => rmSync(own), // deleted, not renamed away: rewritten without a warning
      ],
      undefined,
      { warnNode: async (w) => void events.push(w) },
    );
    expect(r.error).toBeNull();
    const warning = `warning: 00-multus.conflist in ${n.netd} was renamed to 00-multus.conflist.cilium_bak by another program, so the runtime ran the primary network alone for new pods; Cilium renames every other CNI config when its cni.exclusive is true: set cni.exclusive=false (Helm value) to run Cilium as the primary network under multus. Writing 00-multus.conflist again`;
    expect(r.logs.filter((l) => l.startsWith('warning:'))).toEqual([warning]);
    expect(events).toEqual([
      {
        kubeconfig: join(n.netd, 'multus.d', 'multus.kubeconfig'),
        reason: 'MultusConfigRenamed',
        message: warning.slice('warning: '.length),
      },
    ]);
  });

  it('another writer of 00-multus.conf (a second Multus DaemonSet): a warning at start and when it rewrites ours, a node event each', async () => {
    const n = makeNode();
    writeFileSync(join(n.netd, '10-flannel.conflist'), FLANNEL);
    const own = join(n.netd, '00-multus.conflist');
    const theirs = JSON.stringify({ cniVersion: '0.3.1', name: 'multus-cni-network', plugins: [{ type: 'multus' }] });
    writeFileSync(own, theirs); // Go Multus' DaemonSet wrote it before us
    const events: { reason: string; message: string }[] = [];
    let clock = 0;
    const r = await runScripted(
      n.args,
      [
        () => expect(readFileSync(own, 'utf8')).not.toBe(theirs), // ours now
        () => {
          clock += 11 * 60_000; // past the 10-minute rate limit
          writeFileSync(own, theirs); // and it writes again
        },
        () => expect(readFileSync(own, 'utf8')).not.toBe(theirs),
        () => {}, // ours left alone: no warning
      ],
      undefined,
      { warnNode: async (w) => void events.push({ reason: w.reason, message: w.message }), now: () => clock },
    );
    expect(r.error).toBeNull();
    const tail =
      ': another Multus DaemonSet or installer may write it too, and two writers of one file take turns ' +
      '(kubectl get ds -A | grep -i multus; remove the other one). Writing ours';
    const start = `${own} was not written by multus-ts with this configuration${tail}`;
    const later = `${own} was changed by another program after multus-ts wrote it${tail}`;
    expect(r.logs.filter((l) => l.startsWith('warning:'))).toEqual([`warning: ${start}`, `warning: ${later}`]);
    expect(events).toEqual([
      { reason: 'MultusConfigForeign', message: start },
      { reason: 'MultusConfigForeign', message: later },
    ]);
  });

  it('our own file from a previous run (an upgrade restart) is not another writer', async () => {
    const n = makeNode();
    writeFileSync(join(n.netd, '10-flannel.conflist'), FLANNEL);
    expect((await runScripted(n.args, [])).error).toBeNull();
    const again = await runScripted(n.args, [() => {}]);
    expect(again.error).toBeNull();
    expect(again.logs.filter((l) => l.startsWith('warning:'))).toEqual([]);
  });

  const KEEP = ['00-multus.conflist', '10-flannel.conflist', 'multus.d'];
  const keeping = (why: string) =>
    `daemonset kube-system/kube-multus-ds ${why}: keeping the multus config and kubeconfig on this node`;
  it.each<[string, DeletionState, DeletionState, string[], string]>([
    ['deleted (helm uninstall)', 'present', 'deleted', ['10-flannel.conflist', 'multus.d'], 'removed'],
    [
      'unreadable at stop, readable at start (helm uninstall took its account and role)',
      'present',
      'revoked',
      ['10-flannel.conflist', 'multus.d'],
      'removed',
    ],
    ['still there (an upgrade)', 'present', 'present', KEEP, keeping('is still there (an upgrade or a restart)')],
    [
      'unknown (API unreachable)',
      'present',
      { unknown: 'no answer within 10 s' },
      KEEP,
      keeping('may be there (no answer within 10 s)'),
    ],
    [
      'refused at start and at stop (RBAC never allowed it)',
      'revoked',
      'revoked',
      KEEP,
      keeping('may be there (access refused, and it was refused at start too)'),
    ],
  ])('--cleanup-when-deleted: on stop, with the DaemonSet %s', async (_title, atStart, atStop, left, last) => {
    const n = makeNode();
    writeFileSync(join(n.netd, '10-flannel.conflist'), FLANNEL);
    const asked: unknown[] = [];
    const answers = [atStart, atStop];
    const r = await runScripted([...n.args, '--cleanup-when-deleted=kube-system/kube-multus-ds'], [], undefined, {
      deletionState: async (q) => {
        asked.push({ ns: q.namespace, name: q.name, server: q.server, token: q.token });
        return answers.shift()!;
      },
    });
    expect(r.error).toBeNull();
    const question = { ns: 'kube-system', name: 'kube-multus-ds', server: 'https://10.96.0.1:443', token: 'token-1' };
    expect(asked, 'asked at start and at stop').toEqual([question, question]);
    expect(ls(n.netd)).toEqual(left);
    const removed = last === 'removed';
    expect(existsSync(join(n.netd, 'multus.d', 'multus.kubeconfig'))).toBe(!removed);
    expect(r.logs.at(-1)).toBe(removed ? `removed ${join(n.netd, 'multus.d', 'multus.kubeconfig')}` : last);
  });

  it.each<[string, DeletionState, number]>([
    ['deleted', 'deleted', 1],
    ['still there', 'present', 0],
  ])(
    "--dra-driver-name: the DaemonSet %s, the node's ResourceSlices of the driver deleted that many times",
    async (_t, atStop, times) => {
      const n = makeNode();
      writeFileSync(join(n.netd, '10-flannel.conflist'), FLANNEL);
      const answers: DeletionState[] = ['present', atStop];
      const asked: unknown[] = [];
      const args = [
        ...n.args,
        '--cleanup-when-deleted=kube-system/kube-multus-ds',
        '--dra-driver-name=multus.k8s.cni.cncf.io',
      ];
      const r = await runScripted(args, [], undefined, {
        env: { ...ENV, MULTUS_NODE_NAME: 'node-7' },
        deletionState: async () => answers.shift()!,
        deleteDraSlices: async (q) => {
          asked.push({ node: q.nodeName, driver: q.driver, token: q.token });
          return 'deleted them';
        },
      });
      expect(r.error).toBeNull();
      expect(asked).toEqual(Array(times).fill({ node: 'node-7', driver: 'multus.k8s.cni.cncf.io', token: 'token-1' }));
      if (times) expect(r.logs.at(-1)).toBe('deleted them');
    },
  );

  it('rewrites the kubeconfig when the token or the CA changes, and only then', async () => {
    const n = makeNode();
    writeFileSync(join(n.netd, '10-flannel.conflist'), FLANNEL);
    const kc = join(n.netd, 'multus.d', 'multus.kubeconfig');
    const r = await runScripted(n.args, [
      () => writeFileSync(join(n.sa, 'token'), 'token-2'),
      () => {
        expect(readFileSync(kc, 'utf8')).toContain('token: "token-2"');
        writeFileSync(join(n.sa, 'ca.crt'), 'CA2');
      },
      () => expect(readFileSync(kc, 'utf8')).toContain(`certificate-authority-data: ${b64('CA2')}`),
      () => {},
    ]);
    expect(r.error).toBeNull();
    expect(r.logs.filter((l) => l.startsWith('kubeconfig is created'))).toHaveLength(3);
    expect(r.logs).toContain('CA (false) or SA token (true) changed - recreating kubeconfig');
  });

  it('removes its file on exit with --cleanup-config-on-exit, and only then', async () => {
    const n = makeNode();
    writeFileSync(join(n.netd, '10-flannel.conflist'), FLANNEL);
    expect((await runScripted(n.args, [() => {}])).error).toBeNull();
    expect(ls(n.netd)).toContain('00-multus.conflist');
    expect((await runScripted([...n.args, '--cleanup-config-on-exit'], [() => {}])).error).toBeNull();
    expect(ls(n.netd)).toEqual(['10-flannel.conflist', 'multus.d']);
  });

  it('does not watch with --skip-config-watch', async () => {
    const n = makeNode();
    const master = join(n.netd, '10-net.conflist');
    writeFileSync(master, FLANNEL);
    const r = await runScripted(
      [...n.args, '--skip-config-watch'],
      [() => writeFileSync(master, BRIDGE_031), () => {}],
    );
    expect(r.error).toBeNull();
    expect(ls(n.netd)).toEqual(['00-multus.conflist', '10-net.conflist', 'multus.d']);
  });

  it('renames the master with --rename-conf-file', async () => {
    const n = makeNode();
    writeFileSync(join(n.netd, '10-flannel.conflist'), FLANNEL);
    const r = await runScripted([...n.args, '--rename-conf-file'], [() => {}]);
    expect(r.error).toBeNull();
    expect(ls(n.netd)).toEqual(['00-multus.conflist', '10-flannel.conflist.old', 'multus.d']);
  });

  it('copies a given --multus-conf-file and removes it on exit with --cleanup-config-on-exit', async () => {
    const n = makeNode();
    writeFileSync(join(n.src, '00-mine.conf'), BRIDGE_031);
    const args = [...n.args, `--multus-conf-file=${join(n.src, '00-mine.conf')}`, '--cleanup-config-on-exit'];
    const r = await runScripted(args, [
      () => expect(readFileSync(join(n.netd, '00-mine.conf'), 'utf8')).toBe(BRIDGE_031),
    ]);
    expect(r.error).toBeNull();
    expect(ls(n.netd)).toEqual(['multus.d']);
  });

  it.each<[string, (n: ReturnType<typeof makeNode>) => string[], RegExp]>([
    ['no conf dir', (n) => [...n.args, `--cni-conf-dir=${n.root}/none`], /cni-conf-dir \S+\/none is not found/],
    ['no bin dir', (n) => [...n.args, `--cni-bin-dir=${n.root}/none`], /cni-bin-dir \S+\/none is not found/],
    ['no bin file', (n) => [...n.args, `--multus-bin-file=${n.root}/none`], /multus-bin-file \S+\/none is not found/],
    ['no conf file', (n) => [...n.args, `--multus-conf-file=${n.root}/none`], /multus-conf-file \S+\/none is not/],
    [
      'no token',
      (n) => [...n.args, `--service-account-dir=${n.root}/none`],
      /service account \S+\/none\/ca.crt not found/,
    ],
  ])('fails with %s, naming the path', async (_name, args, msg) => {
    const n = makeNode();
    writeFileSync(join(n.netd, '10-flannel.conflist'), FLANNEL);
    const r = await runScripted(args(n), []);
    expect(r.error?.message).toMatch(msg);
  });

  it('fails on a bad master at start, naming it, with nothing half-written', async () => {
    const n = makeNode();
    writeFileSync(join(n.netd, '10-bad.conf'), '{"name":"x"}');
    const r = await runScripted(n.args, []);
    expect(r.error?.message).toBe(
      `master CNI config ${join(n.netd, '10-bad.conf')}: no "cniVersion": add one (e.g. "1.0.0")`,
    );
    expect(ls(n.netd)).toEqual(['10-bad.conf', 'multus.d']);
    expect(ls(join(n.netd, 'multus.d'))).toEqual(['multus.kubeconfig']);
  });

  it('leaves no temp file when the final rename fails, and names the path', async () => {
    const n = makeNode();
    writeFileSync(join(n.netd, '10-flannel.conflist'), FLANNEL);
    mkdirSync(join(n.netd, '00-multus.conflist')); // rename(2) of a file over a directory fails (EISDIR)
    const r = await runScripted(n.args, []);
    expect(r.error?.message).toMatch(
      new RegExp(
        `^cannot write ${join(n.netd, '00-multus.conflist')} \\(EISDIR: .*\\): check that ${n.netd} is writable$`,
      ),
    );
    expect(ls(n.netd)).toEqual(['00-multus.conflist', '10-flannel.conflist', 'multus.d']);
  });

  it('keeps the last good file and retries when the master turns bad during the watch', async () => {
    const n = makeNode();
    const master = join(n.netd, '10-net.conflist');
    writeFileSync(master, FLANNEL);
    const r = await runScripted(n.args, [
      () => writeFileSync(master, '{"cniVersion":'),
      () => expect(delegateName(conf(n.netd, '00-multus.conflist'))).toBe('cbr0'),
      () => writeFileSync(master, BRIDGE_031),
      () => expect(delegateName(conf(n.netd, '00-multus.conf'))).toBe('br'),
    ]);
    expect(r.error).toBeNull();
    expect(r.logs.filter((l) => l.startsWith('error (retrying'))).toHaveLength(1);
    expect(ls(n.netd)).toEqual(['00-multus.conf', '10-net.conflist', 'multus.d']);
  });

  describe('--token-binding=node', () => {
    /** A service account JWT as kubelet mounts it (only the claims matter here). */
    const jwt = (ns: string, sa: string): string =>
      [
        'e30',
        Buffer.from(JSON.stringify({ 'kubernetes.io': { namespace: ns, serviceaccount: { name: sa } } })).toString(
          'base64url',
        ),
        'sig',
      ].join('.');
    const NODE_ENV = { ...ENV, MULTUS_NODE_NAME: 'node-a' };

    it('writes a token bound to the node, asked for with the mounted one, and renews it at 80% of its life', async () => {
      const n = makeNode();
      writeFileSync(join(n.sa, 'token'), jwt('kube-system', 'multus-ts'));
      writeFileSync(join(n.netd, '10-flannel.conflist'), FLANNEL);
      const kc = join(n.netd, 'multus.d', 'multus.kubeconfig');
      let now = 1_000_000;
      const asked: NodeTokenRequest[] = [];
      const requestNodeToken = async (r: NodeTokenRequest): Promise<NodeToken> => {
        asked.push(r);
        return { token: `node-token-${asked.length}`, expiresAt: now + 1000_000 };
      };
      const r = await runScripted(
        [...n.args, '--token-binding=node'],
        [
          () => {
            expect(readFileSync(kc, 'utf8')).toContain('token: "node-token-1"');
            now += 799_000; // before 80%: kept
          },
          () => {
            expect(asked).toHaveLength(1);
            now += 2_000; // past 80%: renewed
          },
          () => expect(readFileSync(kc, 'utf8')).toContain('token: "node-token-2"'),
        ],
        undefined,
        { env: NODE_ENV, now: () => now, requestNodeToken },
      );
      expect(r.error).toBeNull();
      expect(asked).toHaveLength(2);
      expect(asked[0]).toMatchObject({
        namespace: 'kube-system',
        name: 'multus-ts',
        nodeName: 'node-a',
        server: 'https://10.96.0.1:443',
        token: jwt('kube-system', 'multus-ts'),
        expirationSeconds: 86400,
      });
      expect(asked[0]!.ca?.toString()).toContain('BEGIN CERTIFICATE');
      expect(r.logs.some((l) => l.startsWith('got a service account token bound to node node-a'))).toBe(true);
      expect(r.logs.some((l) => l.startsWith('renewed the service account token bound to node node-a'))).toBe(true);
      expect(r.logs.join('\n')).not.toContain('node-token-');
    });

    it("keeps the pod's token while the request fails, retries every 10 s, logs each new failure once", async () => {
      const n = makeNode();
      const mounted = jwt('kube-system', 'multus-ts');
      writeFileSync(join(n.sa, 'token'), mounted);
      writeFileSync(join(n.netd, '10-flannel.conflist'), FLANNEL);
      const kc = join(n.netd, 'multus.d', 'multus.kubeconfig');
      let now = 0;
      let calls = 0;
      const requestNodeToken = async (): Promise<NodeToken> => {
        calls++;
        if (calls < 3) throw new Error('TokenRequest ...: HTTP 403: forbidden');
        return { token: 'node-token', expiresAt: now + 3_600_000 };
      };
      const r = await runScripted(
        [...n.args, '--token-binding=node'],
        [
          () => {
            expect(readFileSync(kc, 'utf8')).toContain(`token: "${mounted}"`);
            now += 5_000; // within the retry delay: no request
          },
          () => {
            expect(calls).toBe(1);
            now += 6_000;
          },
          () => {
            expect(calls).toBe(2);
            now += 11_000;
          },
          () => expect(readFileSync(kc, 'utf8')).toContain('token: "node-token"'),
        ],
        undefined,
        { env: NODE_ENV, now: () => now, requestNodeToken },
      );
      expect(r.error).toBeNull();
      expect(calls).toBe(3);
      expect(r.logs.filter((l) => l.startsWith('cannot get a node-bound token'))).toEqual([
        "cannot get a node-bound token (TokenRequest ...: HTTP 403: forbidden); the kubeconfig holds the pod's token, retrying every 10 s",
      ]);
    });

    it('needs MULTUS_NODE_NAME and a service account token; a bad --token-binding is an option error', async () => {
      const n = makeNode();
      writeFileSync(join(n.netd, '10-flannel.conflist'), FLANNEL);
      const noName = await runScripted([...n.args, '--token-binding=node'], [() => {}]);
      expect(noName.error?.message).toMatch(/--token-binding=node needs MULTUS_NODE_NAME/);
      const notJwt = await runScripted([...n.args, '--token-binding=node'], [() => {}], undefined, {
        env: NODE_ENV,
        requestNodeToken: async () => ({ token: 'x', expiresAt: Date.now() + 1e6 }),
      });
      // the mounted "token-1" has no claims: the pod's token stays, and the reason is logged
      expect(notJwt.error).toBeNull();
      expect(notJwt.logs.find((l) => l.startsWith('cannot get a node-bound token'))).toMatch(/no kubernetes.io claims/);
      expect(() => parseInstallArgs(['--token-binding=secret'])).toThrow(
        '--token-binding=secret: write --token-binding=pod or --token-binding=node',
      );
    });
  });
});
