/**
 * build/multus daemon as a child process: start-up errors, the default bound on requests at once, SIGTERM with a
 * call in flight (it finishes, new connections are refused, the socket and the generated config are removed, exit
 * 0), the socket refused to a non-root user, chrootDir running delegates inside another root, and /metrics on
 * 127.0.0.1 (Multus' `metricsPort` alone) or on the address `metricsBindAddress` names (`0.0.0.0`: every address,
 * Multus' `:port`). Needs root and build/multus.
 */
import type { ChildProcess } from 'node:child_process';
import { spawn, spawnSync } from 'node:child_process';
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:net';
import { networkInterfaces, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { fileExists, isRoot, needs } from '../helpers/skip.ts';
import { cniBody, connectError, http } from '../helpers/daemon.ts';
import { testNetns } from '../helpers/netns.ts';

const EXE = resolve('build/multus');
const ready = () => needs(isRoot(), fileExists(EXE, 'the built executable (npm run build)'));

let dir: string;
let child: ChildProcess | undefined;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'mts-daemon-proc-'));
  mkdirSync(join(dir, 'net.d'));
});
afterEach(() => {
  if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  child = undefined;
  rmSync(dir, { recursive: true, force: true });
});

interface Started {
  child: ChildProcess;
  exited: Promise<{ code: number | null; stderr: string }>;
  socket: string;
}

function daemonEnv(): Record<string, string> {
  return { PATH: process.env.PATH ?? '/usr/bin:/bin' }; // no NODE_OPTIONS: the plugin ignores them anyway
}

function spawnDaemon(config: Record<string, unknown> | string): Started {
  const file = join(dir, 'daemon-config.json');
  writeFileSync(file, typeof config === 'string' ? config : JSON.stringify(config));
  const c = spawn(EXE, ['daemon', '--config', file], { env: daemonEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
  child = c;
  let stderr = '';
  c.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<{ code: number | null; stderr: string }>((r) => {
    c.on('exit', (code) => r({ code, stderr }));
  });
  return { child: c, exited, socket: join(dir, 'run', 'multus.sock') };
}

async function until(cond: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 1500 && !cond(); i++) await new Promise((r) => setTimeout(r, 10));
  if (!cond()) throw new Error(`timed out waiting for ${what}`);
}

function baseConfig(extra: Record<string, unknown> = {}): Record<string, unknown> {
  // no drain window (test/daemon/drain.test.ts has it): SIGTERM closes the socket at once
  const base = { socketDir: join(dir, 'run'), cniConfigDir: join(dir, 'net.d'), logLevel: 'verbose' };
  return { ...base, shutdownDrainSeconds: 0, ...extra };
}

function callEnv(command: string, cid = 'c1'): Record<string, string> {
  return {
    CNI_COMMAND: command,
    CNI_CONTAINERID: cid,
    CNI_NETNS: testNetns(),
    CNI_IFNAME: 'eth0',
    CNI_PATH: join(dir, 'bin'),
    CNI_ARGS: 'IgnoreUnknown=1',
  };
}

describe.runIf(ready())('multus daemon (process)', () => {
  it('a bad config value is one line on stderr naming the key, exit 2', async () => {
    const d = spawnDaemon(baseConfig({ connectionLimit: -1 }));
    const { code, stderr } = await d.exited;
    expect(code).toBe(2);
    expect(stderr.trim().split('\n')).toHaveLength(1);
    expect(stderr).toMatch(/`connectionLimit` must be a whole number/);
    const missing = spawn(EXE, ['daemon', '--config', join(dir, 'nope.json')], { env: daemonEnv() });
    const out = await new Promise<number | null>((r) => missing.on('exit', r));
    expect(out).toBe(2);
  });

  it("logLevel info and a metricsPort already taken: Multus' line on stderr, and the daemon serves on", async () => {
    const taken = createServer().listen(0, '127.0.0.1');
    await new Promise((r) => taken.once('listening', r));
    const port = (taken.address() as { port: number }).port;
    try {
      const d = spawnDaemon(baseConfig({ logLevel: 'info', metricsPort: port }));
      await until(() => existsSync(d.socket), 'the daemon to listen');
      expect([200, 503]).toContain((await http(d.socket, '/healthz', { method: 'GET' })).status); // it answers
      d.child.kill('SIGTERM');
      const { code, stderr } = await d.exited;
      expect(code).toBe(0);
      expect(stderr).toContain('multus logging: cannot set logging level to info');
      expect(stderr).toMatch(/cannot serve \/metrics on 127\.0\.0\.1 port \d+: .*the daemon goes on without \/metrics/);
    } finally {
      taken.close();
    }
  });

  it('SIGTERM: the call in flight finishes, new connections refused, socket removed, config kept, exit 0', async () => {
    mkdirSync(join(dir, 'bin'));
    const plugin = join(dir, 'bin', 'slow');
    writeFileSync(
      plugin,
      `#!/bin/sh
cat >/dev/null
touch ${dir}/started
i=0; while [ ! -f ${dir}/release ] && [ $i -lt 1500 ]; do sleep 0.02; i=$((i+1)); done # at most ~30 s
echo '{"cniVersion":"1.0.0","interfaces":[{"name":"eth0","sandbox":"/x"}],'\\
'"ips":[{"address":"10.9.0.2/24","interface":0}]}'
`,
      { mode: 0o755 },
    );
    const slow = { cniVersion: '1.0.0', name: 'slow', type: 'slow' };
    writeFileSync(join(dir, 'net.d', '10-slow.conf'), JSON.stringify(slow));
    const d = spawnDaemon(baseConfig({ binDir: join(dir, 'bin'), cniDir: join(dir, 'cache') }));
    await until(() => existsSync(d.socket) && existsSync(join(dir, 'net.d', '00-multus.conf')), 'the daemon to listen');
    const conf = JSON.parse(readFileSync(join(dir, 'net.d', '00-multus.conf'), 'utf8')) as Record<string, unknown>;
    expect(conf).toMatchObject({ type: 'multus-shim', clusterNetwork: join(dir, 'net.d', '10-slow.conf') });
    const add = http(d.socket, '/cni', { body: cniBody(callEnv('ADD'), conf) });
    await until(() => existsSync(join(dir, 'started')), 'the delegate to start');
    d.child.kill('SIGTERM');
    // Stopped accepting: a new connection is refused while the call is still running.
    let refused = '';
    for (let i = 0; i < 500 && refused !== 'ECONNREFUSED' && refused !== 'ENOENT'; i++) {
      refused = await connectError(d.socket);
      if (refused === 'CONNECTED') await new Promise((r) => setTimeout(r, 10));
    }
    expect(refused).toMatch(/ECONNREFUSED|ENOENT/);
    expect(existsSync(join(dir, 'release'))).toBe(false);
    writeFileSync(join(dir, 'release'), '');
    const answer = await add;
    expect(answer.status).toBe(200);
    expect(answer.json()).toMatchObject({ Result: { ips: [{ address: '10.9.0.2/24' }] } });
    const { code } = await d.exited;
    expect(code).toBe(0);
    expect(existsSync(d.socket)).toBe(false);
    // kept: until a daemon serves again, the shim's thin fallback runs with it (an upgrade's restart)
    expect(JSON.parse(readFileSync(join(dir, 'net.d', '00-multus.conf'), 'utf8'))).toEqual(conf);
    expect(existsSync(join(dir, 'net.d', '10-slow.conf'))).toBe(true);
  });

  it('without a connectionLimit: 8 requests at once, the 9th starts once a slot has been held 2 s', async () => {
    mkdirSync(join(dir, 'bin'));
    mkdirSync(join(dir, 'started'));
    // each delegate notes when it started (seconds since the epoch), then runs until the test releases it
    writeFileSync(
      join(dir, 'bin', 'held'),
      `#!/bin/sh
cat >/dev/null
date +%s.%N > ${dir}/started/$CNI_CONTAINERID
i=0; while [ ! -f ${dir}/release ] && [ $i -lt 1500 ]; do sleep 0.02; i=$((i+1)); done # at most ~30 s
echo '{"cniVersion":"1.0.0","interfaces":[{"name":"eth0","sandbox":"/x"}],"ips":[]}'
`,
      { mode: 0o755 },
    );
    writeFileSync(join(dir, 'net.d', '10-held.conf'), JSON.stringify({ cniVersion: '1.0.0', name: 'h', type: 'held' }));
    const d = spawnDaemon(baseConfig({ binDir: join(dir, 'bin'), cniDir: join(dir, 'cache') }));
    await until(() => existsSync(d.socket) && existsSync(join(dir, 'net.d', '00-multus.conf')), 'the daemon to listen');
    const conf = JSON.parse(readFileSync(join(dir, 'net.d', '00-multus.conf'), 'utf8')) as Record<string, unknown>;
    const ids = Array.from({ length: 9 }, (_, i) => `bound${i}`);
    const adds = ids.map((id) => http(d.socket, '/cni', { body: cniBody(callEnv('ADD', id), conf) }));
    const started = () =>
      readdirSync(join(dir, 'started')).filter((f) => readFileSync(join(dir, 'started', f), 'utf8').length > 0);
    await until(() => started().length >= 8, 'eight delegates to start');
    await until(() => started().length === 9, 'the ninth delegate, once a slot was held 2 s');
    const at = started().map((f) => Number(readFileSync(join(dir, 'started', f), 'utf8')));
    // the 9th waited for a slot's 2 s (less the moments between a slot taken and its delegate started)
    expect(Math.max(...at) - Math.min(...at)).toBeGreaterThan(1);
    writeFileSync(join(dir, 'release'), '');
    for (const a of await Promise.all(adds)) expect(a.status).toBe(200);
  });

  it('SIGTERM with cleanupConfigOnExit: the generated config is removed, as Multus thick does', async () => {
    writeFileSync(
      join(dir, 'net.d', '10-br.conf'),
      JSON.stringify({ cniVersion: '1.0.0', name: 'br', type: 'bridge' }),
    );
    const d = spawnDaemon(baseConfig({ cleanupConfigOnExit: true }));
    const generated = join(dir, 'net.d', '00-multus.conf');
    await until(() => existsSync(d.socket) && existsSync(generated), 'the daemon to listen');
    d.child.kill('SIGTERM');
    expect((await d.exited).code).toBe(0);
    expect(existsSync(generated)).toBe(false);
    expect(existsSync(join(dir, 'net.d', '10-br.conf'))).toBe(true);
  });

  it.runIf(needs(fileExists('/usr/bin/setpriv', 'setpriv (util-linux)')))(
    'the socket is refused to a non-root user (0700 directory, 0600 socket)',
    async () => {
      chmodSync(dir, 0o755);
      const d = spawnDaemon(baseConfig({ multusConfigFile: join(dir, 'none.conf') }));
      await until(() => existsSync(d.socket), 'the daemon to listen');
      const asNobody = (): string => {
        const script =
          "require('net').connect(process.argv[1])" +
          ".on('connect',()=>{console.log('CONNECTED');process.exit(0)})" +
          ".on('error',(e)=>{console.log(e.code);process.exit(0)})";
        const env = { PATH: process.env.PATH ?? '' };
        const nobody = ['--reuid=65534', '--regid=65534', '--clear-groups'];
        const r = spawnSync('setpriv', [...nobody, process.execPath, '-e', script, d.socket], { env });
        return r.stdout.toString().trim();
      };
      expect(asNobody()).toBe('EACCES');
      chmodSync(dirname(d.socket), 0o711); // even with the directory open, the socket itself is root-only
      expect(asNobody()).toBe('EACCES');
      expect(await connectError(d.socket)).toBe('CONNECTED'); // root may
      d.child.kill('SIGTERM');
      expect((await d.exited).code).toBe(0);
    },
  );

  // Through the launcher as multus-chroot (src/daemon/exec.ts): build/multus started the daemon, so no chroot(8)
  it("a delegate's stdout is an unnamed file in the cache dir, not a pipe (plugin-output.ts)", async () => {
    mkdirSync(join(dir, 'bin'));
    // names its stdout's kind as its interface: stat(2) through /proc follows the fd to a file or a pipe
    const script = `#!/bin/sh
if [ -f /proc/self/fd/1 ]; then kind=file; else kind=pipe; fi
echo "{\\"cniVersion\\":\\"1.0.0\\",\\"interfaces\\":[{\\"name\\":\\"$kind\\"}]}"
`;
    writeFileSync(join(dir, 'bin', 'kind'), script, { mode: 0o755 });
    const d = spawnDaemon(baseConfig({ multusConfigFile: join(dir, 'none.conf') }));
    await until(() => existsSync(d.socket), 'the daemon to listen');
    const conf = {
      cniVersion: '1.0.0',
      name: 'm',
      type: 'multus-shim',
      cniDir: join(dir, 'cache'),
      delegates: [{ cniVersion: '1.0.0', name: 'k', type: 'kind' }],
    };
    const add = await http(d.socket, '/cni', { body: cniBody(callEnv('ADD'), conf) });
    expect(add.status).toBe(200);
    expect(add.json()).toMatchObject({ Result: { interfaces: [{ name: 'file' }] } });
    d.child.kill('SIGTERM');
    expect((await d.exited).code).toBe(0);
  });

  it('chrootDir: delegates are found and run inside that root', async () => {
    // A minimal root: dash with its libc, and a plugin that succeeds only when it sees the root's marker.
    const root = join(dir, 'root');
    const ldd = spawnSync('ldd', ['/usr/bin/dash']).stdout.toString();
    const libs = [...ldd.matchAll(/(\/[^\s]+\.so[^\s]*)/g)].map((m) => m[1]!);
    for (const lib of libs) {
      mkdirSync(join(root, dirname(lib)), { recursive: true });
      copyFileSync(lib, join(root, lib));
    }
    mkdirSync(join(root, 'bin'), { recursive: true });
    copyFileSync('/usr/bin/dash', join(root, 'bin', 'sh'));
    chmodSync(join(root, 'bin', 'sh'), 0o755);
    writeFileSync(join(root, 'inside-marker'), '');
    mkdirSync(join(root, 'opt', 'cni', 'bin'), { recursive: true });
    writeFileSync(
      join(root, 'opt', 'cni', 'bin', 'rooted'),
      `#!/bin/sh
if [ ! -f /inside-marker ]; then echo '{"code":7,"msg":"not inside the root"}'; exit 1; fi
echo '{"cniVersion":"1.0.0","interfaces":[{"name":"eth0","sandbox":"/x"}],'\\
'"ips":[{"address":"10.8.0.2/24","interface":0}]}'
`,
      { mode: 0o755 },
    );
    const d = spawnDaemon(baseConfig({ chrootDir: root, multusConfigFile: join(dir, 'none.conf') }));
    await until(() => existsSync(d.socket), 'the daemon to listen');
    const conf = {
      cniVersion: '1.0.0',
      name: 'm',
      type: 'multus-shim',
      binDir: '/opt/cni/bin',
      cniDir: join(dir, 'cache'),
      delegates: [{ cniVersion: '1.0.0', name: 'r', type: 'rooted' }],
    };
    const add = await http(d.socket, '/cni', { body: cniBody(callEnv('ADD'), conf) });
    expect(add.status).toBe(200);
    expect(add.json()).toMatchObject({ Result: { ips: [{ address: '10.8.0.2/24' }] } });
    // Not in the root: not found, as a thin call would say.
    const missing = await http(d.socket, '/cni', {
      body: cniBody(callEnv('ADD', 'c2'), {
        ...conf,
        delegates: [{ cniVersion: '1.0.0', name: 'x', type: 'dash' }],
        binDir: '/usr/bin',
      }),
    });
    expect(missing.status).toBe(400);
    expect(missing.json()).toMatchObject({ code: 7, msg: expect.stringContaining('failed to find plugin "dash"') });
    d.child.kill('SIGTERM');
    expect((await d.exited).code).toBe(0);
  });
});

/** A non-loopback IPv4 address of this host: what a scrape of the node's address reaches. */
function nodeAddress(): string | undefined {
  const all = Object.values(networkInterfaces()).flatMap((list) => list ?? []);
  return all.find((a) => a.family === 'IPv4' && !a.internal)?.address;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

async function scrape(address: string, port: number): Promise<string> {
  try {
    const res = await fetch(`http://${address}:${port}/metrics`, { signal: AbortSignal.timeout(5000) });
    return `${res.status} ${(await res.text()).includes('process_resident_memory_bytes') ? 'metrics' : 'other'}`;
  } catch (e) {
    return String((e as { cause?: { code?: string } }).cause?.code ?? e);
  }
}

async function untilServed(address: string, port: number): Promise<void> {
  let last = '';
  for (let i = 0; i < 300; i++) {
    last = await scrape(address, port);
    if (last === '200 metrics') return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`/metrics on ${address}:${port} not served within 15 s: ${last}`);
}

const node = nodeAddress();
describe.runIf(ready() && needs({ ok: node !== undefined, reason: 'needs a non-loopback IPv4 address on the host' }))(
  'multus daemon /metrics address',
  () => {
    it("metricsPort alone (Multus' key): the node itself only (127.0.0.1); the node's address is refused", async () => {
      const port = await freePort();
      const d = spawnDaemon(baseConfig({ metricsPort: port }));
      await untilServed('127.0.0.1', port); // /metrics listens right after the socket
      expect(await scrape(node!, port)).toBe('ECONNREFUSED');
      d.child.kill('SIGTERM');
      expect((await d.exited).code).toBe(0);
    });

    it('metricsBindAddress 0.0.0.0 opts into every address, as Multus\' ":<port>"', async () => {
      const port = await freePort();
      const d = spawnDaemon(baseConfig({ metricsPort: port, metricsBindAddress: '0.0.0.0' }));
      await untilServed('127.0.0.1', port);
      expect(await scrape(node!, port)).toBe('200 metrics');
      d.child.kill('SIGTERM');
      expect((await d.exited).code).toBe(0);
    });
  },
);
