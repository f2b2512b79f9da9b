/**
 * The linux/arm64 build (`npm run build -- --arch arm64`: build/arm64/multus and multus-shim, docs/build.md "arm64")
 * run on this x64 machine under Debian's qemu-user-static through binfmt_misc: VERSION, a delegates-only
 * ADD/CHECK/DEL through libcni in real namespaces (the delegates are this machine's own amd64 plugins, which the
 * emulated multus execs natively), and the resident daemon serving an ADD through the arm64 shim. The build is made
 * here once (about 10 s warm, 70 s with a cold Go cache for arm64). Under emulation a call costs many times what it
 * costs natively: nothing here is timed.
 */
import { spawn, spawnSync } from 'node:child_process';
import {
  existsSync,
  openSync,
  readSync,
  closeSync,
  readdirSync,
  symlinkSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { fileExists, needs } from '../helpers/skip.ts';
import {
  REPO_ROOT,
  TestWorld,
  clusterConflist,
  describeRun,
  e2eRequirements,
  ipv4Of,
  multusConf,
  reservedIps,
  runMultus,
  withSbin,
  writeMultusConf,
} from './helpers.ts';

const OUT = join(REPO_ROOT, 'build/arm64');
const ARM64 = join(OUT, 'multus');
const ready = needs(
  ...e2eRequirements(),
  fileExists(
    '/proc/sys/fs/binfmt_misc/qemu-aarch64',
    'qemu-user-static registered in binfmt_misc (scripts/setup-arm64.sh)',
  ),
  fileExists('/lib/ld-linux-aarch64.so.1', "Debian's libc6:arm64 (scripts/setup-arm64.sh)"),
  fileExists('/usr/bin/qemu-aarch64-static', "Debian's qemu-user-static (scripts/setup-arm64.sh)"),
);

/** ELF e_machine: 183 is AArch64, 62 x86-64. */
function machine(file: string): number {
  const fd = openSync(file, 'r');
  const b = Buffer.alloc(20);
  readSync(fd, b, 0, 20, 0);
  closeSync(fd);
  return b.readUInt16LE(18);
}

describe.skipIf(!ready)('build/arm64/multus under qemu-user', () => {
  let world: TestWorld;
  let net = 60;

  beforeAll(() => {
    const r = spawnSync(process.execPath, [join(REPO_ROOT, 'scripts/build.mjs'), '--arch', 'arm64', '--quiet'], {
      encoding: 'utf8',
      timeout: 600_000,
    });
    expect(r.status, r.stderr).toBe(0);
  }, 600_000);
  beforeEach(async () => {
    world = await new TestWorld().setup();
    // the runtime's bin dir holds the arm64 executable (a link: the launcher finds its Bun executable beside the target)
    unlinkSync(join(world.binDir, 'multus'));
    symlinkSync(ARM64, join(world.binDir, 'multus'));
  });
  afterEach(async () => {
    await world.cleanup();
  });

  it('is arm64 through and through: the launcher, its Bun executable and the shim', () => {
    const payload = readdirSync(OUT).find((n) => n.startsWith('.multus-bun-'))!;
    for (const f of [ARM64, join(OUT, payload), join(OUT, 'multus-shim')]) expect([f, machine(f)]).toEqual([f, 183]);
    expect(machine(join(REPO_ROOT, 'build/multus'))).toBe(62);
  });

  it('answers VERSION', async () => {
    const r = await runMultus({ command: 'VERSION', config: { cniVersion: '1.0.0' }, bin: ARM64 });
    expect(r.code, describeRun(r)).toBe(0);
    expect(r.json).toMatchObject({ cniVersion: '1.1.0', supportedVersions: expect.arrayContaining(['1.0.0']) });
  });

  it("holds the caller's variables from Bun (main()'s path: no fast path on arm64)", () => {
    const hostile = { CNI_COMMAND: 'VERSION', BUN_BE_BUN: '1', BUN_OPTIONS: '--version' };
    const through = spawnSync(ARM64, [], { env: hostile, input: '{}', encoding: 'utf8' });
    expect(JSON.parse(through.stdout).supportedVersions, through.stderr).toContain('1.0.0');
    // the same variables given to the Bun executable directly reach Bun: it prints its version, not a CNI answer
    const payload = join(
      OUT,
      readdirSync(OUT).find((n) => n.startsWith('.multus-bun-'))!,
    );
    const direct = spawnSync(payload, [], { env: hostile, input: '{}', encoding: 'utf8' });
    expect(direct.stdout.trim()).toMatch(/^1\.4\.5/);
  });

  it('ADD, CHECK and DEL with a delegate (bridge + host-local) through libcni', async () => {
    const subnet = `10.253.${net++}.0/24`;
    const conf = await writeMultusConf(world, multusConf(world, '1.0.0', [clusterConflist(world, '1.0.0', subnet)]));
    const add = await world.driver('add', conf);
    expect(add.code, describeRun(add)).toBe(0);
    expect(await ipv4Of(world.podNs, 'eth0')).toHaveLength(1);
    const check = await world.driver('check', conf);
    expect(check.code, describeRun(check)).toBe(0);
    const del = await world.driver('del', conf);
    expect(del.code, describeRun(del)).toBe(0);
    expect(await world.podLinks()).toEqual(['lo']);
    expect(await reservedIps(world.ipamDir)).toEqual([]);
  }, 120_000);

  it('the daemon serves an ADD and its DEL through the arm64 shim', async () => {
    const sockDir = join(world.dir, 'run');
    const file = join(world.dir, 'daemon-config.json');
    writeFileSync(
      file,
      JSON.stringify({
        socketDir: sockDir,
        cniConfigDir: join(world.dir, 'net.d'),
        logToStderr: true,
        logLevel: 'verbose',
      }),
    );
    const daemon = spawn('ip', ['netns', 'exec', world.hostNs, ARM64, 'daemon', '--config', file], {
      env: { PATH: withSbin(process.env.PATH) },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let log = '';
    daemon.stderr.on('data', (d: Buffer) => (log += d.toString()));
    try {
      for (let i = 0; i < 600 && !existsSync(join(sockDir, 'multus.sock')) && daemon.exitCode === null; i++) {
        await new Promise((r) => setTimeout(r, 100));
      }
      expect(existsSync(join(sockDir, 'multus.sock')), log).toBe(true);
      symlinkSync(join(OUT, 'multus-shim'), join(world.binDir, 'multus-shim'));
      const subnet = `10.253.${net++}.0/24`;
      const cluster = clusterConflist(world, '1.0.0', subnet);
      const shim = multusConf(world, '1.0.0', [cluster], { type: 'multus-shim', daemonSocketDir: sockDir });
      const conf = await writeMultusConf(world, shim);
      const add = await world.driver('add', conf);
      expect(add.code, describeRun(add)).toBe(0);
      expect(log).toContain(`ADD ${world.containerId}: 200`);
      expect(await ipv4Of(world.podNs, 'eth0')).toHaveLength(1);
      const del = await world.driver('del', conf);
      expect(del.code, describeRun(del)).toBe(0);
      expect(log).toContain(`DEL ${world.containerId}: 200`);
      expect(await reservedIps(world.ipamDir)).toEqual([]);
    } finally {
      daemon.kill('SIGKILL');
    }
  }, 180_000);
});
