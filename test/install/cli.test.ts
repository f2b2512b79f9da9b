/**
 * The built executable's install roles: `multus --is-default-ready` (present, absent, appearing during the
 * wait, read from the installed 00-multus.conflist), `multus install` (a bad option, SIGTERM with
 * --cleanup-config-on-exit and Multus' --force-config-watch; Multus' log stamp; which copies it leaves in the
 * page cache).
 */
import { spawn, spawnSync } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  rmdirSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { describe, expect, it, onTestFinished } from 'vitest';
import { fileExists, isRoot, needs, type Requirement } from '../helpers/skip.ts';
import { ENV, FLANNEL, makeNode } from '../helpers/install.ts';
import { cachedBytes, haveFincore } from '../helpers/page-cache.ts';

const REPO = join(import.meta.dirname, '..', '..');
const TS = process.env.MULTUS_TS_BIN || join(REPO, 'build', 'multus');
const built = needs(fileExists(TS, 'the built executable (npm run build)'));
const fincore = needs(haveFincore());

/** A memory cgroup this test may make (v1's memory controller, or v2 with memory in the root's subtree). */
const CGROUP_V1 = '/sys/fs/cgroup/memory';
function memoryCgroup(): Requirement {
  const v2 =
    existsSync('/sys/fs/cgroup/cgroup.subtree_control') &&
    readFileSync('/sys/fs/cgroup/cgroup.subtree_control', 'utf8').split(/\s+/).includes('memory');
  return { ok: existsSync(join(CGROUP_V1, 'memory.limit_in_bytes')) || v2, reason: 'needs a memory cgroup to make' };
}

/** A fresh memory cgroup limited to `bytes`, removed when the test ends; its procs file and its peak. */
function limitedCgroup(bytes: number): { procs: string; peak: () => number } {
  const v1 = existsSync(join(CGROUP_V1, 'memory.limit_in_bytes'));
  const dir = join(v1 ? CGROUP_V1 : '/sys/fs/cgroup', `multus-ts-test-${process.pid}`);
  mkdirSync(dir);
  onTestFinished(() => rmdirSync(dir));
  writeFileSync(join(dir, v1 ? 'memory.limit_in_bytes' : 'memory.max'), String(bytes));
  return {
    procs: join(dir, 'cgroup.procs'),
    peak: () => Number(readFileSync(join(dir, v1 ? 'memory.max_usage_in_bytes' : 'memory.peak'), 'utf8')),
  };
}

interface Out {
  code: number | null;
  stdout: string;
  stderr: string;
}

function run(args: string[], during?: (p: ReturnType<typeof spawn>, out: Out) => Promise<void>): Promise<Out> {
  const env: Record<string, string> = { PATH: process.env.PATH ?? '/usr/bin:/bin', TZ: 'UTC', ...ENV };
  const p = spawn(TS, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  const out: Out = { code: null, stdout: '', stderr: '' };
  p.stdout.on('data', (d: Buffer) => (out.stdout += d.toString()));
  p.stderr.on('data', (d: Buffer) => (out.stderr += d.toString()));
  const exited = new Promise<Out>((res) => p.on('exit', (code) => res({ ...out, code })));
  if (during) void during(p, out);
  return exited.then((o) => ({ ...o, stdout: out.stdout, stderr: out.stderr }));
}

describe.runIf(built)('multus --is-default-ready', () => {
  it('exits 0 when the file exists, 1 with one line when it does not (--wait 0: one check)', async () => {
    const n = makeNode();
    const file = join(n.root, 'ready');
    writeFileSync(file, '');
    expect(await run(['--is-default-ready', file])).toEqual({ code: 0, stdout: `ready: ${file} exists\n`, stderr: '' });
    const missing = join(n.root, 'missing');
    expect(await run(['--is-default-ready', missing, '--wait', '0'])).toEqual({
      code: 1,
      stdout: '',
      stderr: `not ready: the readiness indicator file ${missing} does not exist (after 1 checks over 0 s)\n`,
    });
  });

  it('waits for a file that appears during the wait', async () => {
    const n = makeNode();
    const file = join(n.root, 'later');
    const out = await run(['--is-default-ready', file, '--wait=20'], async () => {
      await delay(400);
      writeFileSync(file, '');
    });
    expect(out).toMatchObject({ code: 0, stdout: `ready: ${file} exists\n` });
  });

  it("reads the installed conf's readinessindicatorfile under --host-prefix", async () => {
    const n = makeNode();
    const dir = n.netd;
    const conf = (indicator: string): string =>
      JSON.stringify({
        cniVersion: '1.0.0',
        name: 'm',
        plugins: [{ type: 'multus', readinessindicatorfile: indicator }],
      });
    const args = ['--is-default-ready', '--wait=0', `--cni-conf-dir=${dir}`, `--host-prefix=${n.root}`];
    expect((await run(args)).stderr).toMatch(/^not ready: no 00-multus.conf or 00-multus.conflist in .*\n$/);
    writeFileSync(join(dir, '00-multus.conflist'), conf('/run/flannel/subnet.env'));
    expect((await run(args)).stderr).toBe(
      `not ready: the readinessindicatorfile ${n.root}/run/flannel/subnet.env of ${dir}/00-multus.conflist ` +
        'does not exist (after 1 checks over 0 s)\n',
    );
    writeFileSync(join(dir, '00-multus.conflist'), conf(''));
    expect(await run(args)).toMatchObject({ code: 0 });
  });

  it('refuses a bad argument (exit 2)', async () => {
    expect(await run(['--is-default-ready', '--wait', 'soon'])).toMatchObject({
      code: 2,
      stderr: 'multus --is-default-ready: --wait soon: give a number of seconds >= 0\n',
    });
  });
});

describe.runIf(built)('multus install (the executable)', () => {
  it('refuses a bad option with exit 2 and one line', async () => {
    expect(await run(['install', '--cni-bin-dri=/x'])).toEqual({
      code: 2,
      stdout: '',
      stderr: 'multus install: unknown option --cni-bin-dri (see multus install --help for the list)\n',
    });
  });

  it('fails with exit 1 naming the missing dir', async () => {
    const n = makeNode();
    const out = await run(['install', ...n.args, `--cni-conf-dir=${n.root}/nope`]);
    expect(out.code).toBe(1);
    expect(out.stderr).toBe(
      `multus install: cni-conf-dir ${n.root}/nope is not found: ` +
        "mount the host's /etc/cni/net.d there or set --cni-conf-dir\n",
    );
  });

  it.runIf(fincore)('leaves neither the copies nor their sources in the page cache, and the copy runs', async () => {
    const n = makeNode();
    // the sources: a copy of the build (the image's own files, which its daemon runs), read whole, so cached
    const payload = readdirSync(join(TS, '..')).find((f) => f.startsWith('.multus-bun-'))!;
    for (const f of ['multus', payload]) {
      copyFileSync(join(TS, '..', f), join(n.src, f));
      readFileSync(join(n.src, f));
      expect(cachedBytes(join(n.src, f))).toBeGreaterThan(1 << 20);
    }
    const out = await run(['install', ...n.args, '--install-binary-only']);
    expect(out).toMatchObject({ code: 0, stderr: '' });
    expect(readdirSync(n.bin)).toContain(payload);
    // written in 64 KiB pieces, fsynced, then advised out with their sources: a first run of either reads it
    // from disk, and the caller's cgroup holds its pages (docs/archive/performance.md, "The installed copy kept in the
    // page cache")
    for (const f of [join(n.bin, 'multus'), join(n.bin, payload), join(n.src, 'multus'), join(n.src, payload)]) {
      expect(statSync(f).size).toBeGreaterThan(1 << 20);
      expect({ file: f, cached: cachedBytes(f) }).toEqual({ file: f, cached: 0 });
    }
    const v = spawnSync(join(n.bin, 'multus'), [], { env: { CNI_COMMAND: 'VERSION' }, input: '{}', encoding: 'utf8' });
    expect(JSON.parse(v.stdout).supportedVersions).toContain('1.0.0');
  });

  it.runIf(fincore && needs(isRoot(), memoryCgroup()))(
    "stays far under deployments/multus-ts-thin.yml's 150Mi: what it reads and writes leaves as it goes",
    () => {
      const n = makeNode();
      const payload = readdirSync(join(TS, '..')).find((f) => f.startsWith('.multus-bun-'))!;
      for (const f of ['multus', payload]) copyFileSync(join(TS, '..', f), join(n.src, f));
      const cg = limitedCgroup(150 << 20);
      // the page cache the install adds is charged to its cgroup: the sources read, the copies written (230 MB)
      const r = spawnSync(
        'sh',
        ['-c', 'echo $$ > "$0" && exec "$@"', cg.procs, TS, 'install', ...n.args, '--install-binary-only'],
        {
          env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...ENV },
          encoding: 'utf8',
        },
      );
      expect({ code: r.status, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
      // let go every 8 MiB, so the cgroup's peak is the installer's own memory and a few pieces; it reached the
      // limit when the pages were dropped at the end of each copy
      expect(cg.peak()).toBeLessThan(120 << 20); // 84 MiB measured
      for (const f of [join(n.bin, 'multus'), join(n.bin, payload)]) expect(cachedBytes(f)).toBe(0);
    },
  );

  it('on SIGTERM removes what it wrote with --cleanup-config-on-exit and exits 0', async () => {
    const n = makeNode();
    writeFileSync(join(n.netd, '10-flannel.conflist'), FLANNEL);
    const out = await run(['install', ...n.args, '--cleanup-config-on-exit', '--force-config-watch'], async (p, o) => {
      while (!o.stdout.includes('Entering watch loop')) await delay(50);
      expect(readdirSync(n.netd).sort()).toEqual(['00-multus.conflist', '10-flannel.conflist', 'multus.d']);
      p.kill('SIGTERM');
    });
    expect(out.code).toBe(0);
    expect(readdirSync(n.netd).sort()).toEqual(['10-flannel.conflist', 'multus.d']);
    // Multus' stamp (Go's time.RFC3339, `Z` in UTC, no fraction) on every line, --force-config-watch accepted
    const lines = out.stdout.split('\n').filter((l) => l !== '');
    expect(lines.length).toBeGreaterThan(2);
    for (const line of lines) expect(line).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \S/);
  });
});
