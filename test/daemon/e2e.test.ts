/**
 * Resident mode end to end: libcni (the driver) execs a shim, the shim talks to `build/multus daemon`, the
 * daemon runs the real bridge + host-local plugins in real namespaces. With our shim (build/multus-shim):
 * ADD/CHECK/DEL served by the daemon; daemon down -> the shim falls back to the thin plugin; daemon killed
 * (SIGKILL) during an ADD, then a DEL (through the fallback) cleans everything. With Multus v4.3.0's own shim
 * (.cache/gomultus/multus-shim): ADD/CHECK/DEL against this daemon.
 *
 * The shims come from other builds: MULTUS_TS_SHIM and MULTUS_TS_UPSTREAM_SHIM override their paths.
 */
import type { ChildProcess } from 'node:child_process';
import { spawn } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { fileExists, needs } from '../helpers/skip.ts';
import type { TestWorld as World } from '../e2e/helpers.ts';
import {
  MULTUS_BIN,
  REPO_ROOT,
  TestWorld,
  clusterConflist,
  describeRun,
  e2eRequirements,
  ipv4Of,
  multusConf,
  reservedIps,
  withSbin,
  writeMultusConf,
} from '../e2e/helpers.ts';

const OUR_SHIM = process.env.MULTUS_TS_SHIM ?? join(REPO_ROOT, 'build/multus-shim');
const UPSTREAM_SHIM =
  process.env.MULTUS_TS_UPSTREAM_SHIM ??
  join(process.env.MULTUS_TS_CACHE_DIR || join(REPO_ROOT, '.cache'), 'gomultus/multus-shim');

const base = needs(...e2eRequirements());
const withOurShim = base && needs(fileExists(OUR_SHIM, 'the native shim build/multus-shim (npm run build with Go)'));
const withUpstreamShim =
  base && needs(fileExists(UPSTREAM_SHIM, "Multus v4.3.0's shim (bash test/peers/build-gomultus.sh)"));

type DelegateExec = 'daemon' | 'caller';

interface Daemon {
  child: ChildProcess;
  log(): string;
  exited: Promise<number | null>;
}

let world: World;
let daemon: Daemon | undefined;
let net = 40;

beforeEach(async () => {
  world = await new TestWorld().setup();
});
afterEach(async () => {
  if (daemon && daemon.child.exitCode === null && daemon.child.signalCode === null) daemon.child.kill('SIGKILL');
  daemon = undefined;
  writeFileSync(join(world.dir, 'release'), ''); // lets a stuck slow plugin end
  await world.cleanup();
});

function socketDir(): string {
  return join(world.dir, 'run');
}

async function startDaemon(delegateExec: DelegateExec = 'daemon'): Promise<Daemon> {
  const file = join(world.dir, 'daemon-config.json');
  writeFileSync(
    file,
    JSON.stringify({
      socketDir: socketDir(),
      cniConfigDir: join(world.dir, 'net.d'),
      logLevel: 'verbose',
      logToStderr: true,
      delegateExec,
    }),
  );
  // In the test's host namespace, where the driver runs: bridges and host veth ends are created there.
  const child = spawn('ip', ['netns', 'exec', world.hostNs, MULTUS_BIN, 'daemon', '--config', file], {
    env: { PATH: withSbin(process.env.PATH) },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let log = '';
  child.stderr!.on('data', (d: Buffer) => (log += d.toString()));
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  for (let i = 0; i < 1000 && !existsSync(join(socketDir(), 'multus.sock')); i++) {
    if (child.exitCode !== null) break;
    await new Promise((r) => setTimeout(r, 10));
  }
  if (!existsSync(join(socketDir(), 'multus.sock'))) throw new Error(`the daemon did not start: ${log}`);
  daemon = { child, log: () => log, exited };
  return daemon;
}

function installShim(shim: string): void {
  const dest = join(world.binDir, 'multus-shim');
  copyFileSync(shim, dest);
  chmodSync(dest, 0o755);
}

/** A chained plugin that passes prevResult on, and on ADD waits for <dir>/release after touching <dir>/started. */
function installSlowPlugin(): void {
  const path = join(world.binDir, 'slow');
  writeFileSync(
    path,
    `#!/bin/sh
input=$(cat)
if [ "$CNI_COMMAND" = ADD ]; then
  echo $PPID > ${world.dir}/started
  i=0; while [ ! -f ${world.dir}/release ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done # at most ~30 s
fi
if [ "$CNI_COMMAND" = ADD ]; then
  printf '%s' "$input" | sed -e 's/.*"prevResult"://' -e 's/}$//'
fi
`,
    { mode: 0o755 },
  );
}

/**
 * A chained plugin that passes prevResult on and appends to <dir>/who the command, its parent's name (multus-shim
 * when the shim ran it) and whether it has HOME (the daemon's environment has only PATH, the shim's is the test's).
 */
function installWhoPlugin(): void {
  writeFileSync(
    join(world.binDir, 'who'),
    `#!/bin/sh
input=$(cat)
echo "$CNI_COMMAND $(cat /proc/$PPID/comm) \${HOME:+home}" >> ${world.dir}/who
if [ "$CNI_COMMAND" = ADD ]; then
  printf '%s' "$input" | sed -e 's/.*"prevResult"://' -e 's/}$//'
fi
`,
    { mode: 0o755 },
  );
}

const whoLines = (): string[] =>
  existsSync(join(world.dir, 'who')) ? readFileSync(join(world.dir, 'who'), 'utf8').trim().split('\n') : [];

async function shimConf(
  version: string,
  extraPlugins: Record<string, unknown>[] = [],
): Promise<{ conf: string; subnet: string }> {
  net++;
  const subnet = `10.253.${net}.0/24`;
  const cluster = clusterConflist(world, version, subnet, extraPlugins);
  // a daemon that is down stays down here: the shim waits 1 s for it (shim/wait.go), then falls back
  const conf = multusConf(world, version, [cluster], {
    type: 'multus-shim',
    daemonSocketDir: socketDir(),
    shimWaitSeconds: 1,
  });
  return { conf: await writeMultusConf(world, conf), subnet };
}

const served = (d: Daemon, command: string) => d.log().includes(`${command} ${world.containerId}: 200`);

/** ADD (eth0 from the bridge's pool), CHECK and DEL of `conf` through the shim, each served by `d`; nothing left. */
async function addCheckDel(d: Daemon, conf: string): Promise<void> {
  const add = await world.driver('add', conf);
  expect(add.code, describeRun(add)).toBe(0);
  expect(served(d, 'ADD')).toBe(true);
  expect(add.json).toMatchObject({ cniVersion: '1.0.0', ips: [{ address: expect.stringMatching(/^10\.253\./) }] });
  expect(await ipv4Of(world.podNs, 'eth0')).toHaveLength(1);
  for (const command of ['check', 'del'] as const) {
    const run = await world.driver(command, conf);
    expect(run.code, describeRun(run)).toBe(0);
    expect(served(d, command.toUpperCase())).toBe(true);
  }
  expect(await world.podLinks()).toEqual(['lo']);
  expect(await reservedIps(world.ipamDir)).toEqual([]);
}

// delegateExec "caller" (daemon/caller-exec.ts): the same calls with the delegates run by the shim
describe.skipIf(!withOurShim).each(['daemon', 'caller'] as const)(
  'resident mode through build/multus-shim, delegateExec %s',
  (mode) => {
    it('ADD, CHECK and DEL are served by the daemon with the real plugins', async () => {
      installShim(OUR_SHIM);
      const d = await startDaemon(mode);
      installWhoPlugin();
      const { conf } = await shimConf('1.0.0', [{ type: 'who' }]);
      await addCheckDel(d, conf);
      // who ran the delegates, and with whose environment
      const ran = mode === 'caller' ? 'multus-shim home' : expect.not.stringContaining('multus-shim');
      expect(whoLines()).toEqual(['ADD', 'CHECK', 'DEL'].map((c) => (typeof ran === 'string' ? `${c} ${ran}` : ran)));
    });

    it('a failed ADD of the second attachment rolls back both', async () => {
      installShim(OUR_SHIM);
      installWhoPlugin();
      writeFileSync(
        join(world.binDir, 'failer'),
        `#!/bin/sh\ncat >/dev/null\n[ "$CNI_COMMAND" = ADD ] || exit 0\necho '{"code":11,"msg":"failer says no"}'\nexit 1\n`,
        { mode: 0o755 },
      );
      const d = await startDaemon(mode);
      net++;
      const cluster = clusterConflist(world, '1.0.0', `10.253.${net}.0/24`, [{ type: 'who' }]);
      const failing = { cniVersion: '1.0.0', name: 'failing', plugins: [{ type: 'failer' }] };
      const shim = { type: 'multus-shim', daemonSocketDir: socketDir() };
      const conf = await writeMultusConf(world, multusConf(world, '1.0.0', [cluster, failing], shim));
      const add = await world.driver('add', conf);
      expect(add.code, describeRun(add)).not.toBe(0);
      expect(add.stdout).toContain('failer says no');
      expect(d.log()).toContain(`ADD ${world.containerId}: 500`);
      // no DEL from the runtime: the daemon's rollback undid the first attachment, through the shim in caller mode
      expect(await world.podLinks()).toEqual(['lo']);
      expect(await reservedIps(world.ipamDir)).toEqual([]);
      expect(whoLines().map((l) => l.split(' ').slice(0, 2).join(' '))).toEqual(
        mode === 'caller'
          ? ['ADD multus-shim', 'DEL multus-shim']
          : [expect.stringMatching(/^ADD /), expect.stringMatching(/^DEL /)],
      );
    });

    // issue 51, finding 4: a delegate that is the shim (by type, or a copy under another name) would send the call
    // back into this daemon under the same container and wait on itself; refused at once, the ADD rolled back
    it.each(['multus-shim', 'othershim'])('a delegate of type %s is refused by the daemon at once', async (type) => {
      installShim(OUR_SHIM);
      copyFileSync(OUR_SHIM, join(world.binDir, 'othershim'));
      chmodSync(join(world.binDir, 'othershim'), 0o755);
      const d = await startDaemon(mode);
      net++;
      const cluster = clusterConflist(world, '1.0.0', `10.253.${net}.0/24`);
      const nested = { cniVersion: '1.0.0', name: 'nested', type, daemonSocketDir: socketDir() };
      const conf = await writeMultusConf(
        world,
        multusConf(world, '1.0.0', [cluster, nested], { type: 'multus-shim', daemonSocketDir: socketDir() }),
      );
      const add = await world.driver('add', conf);
      expect(add.code, describeRun(add)).not.toBe(0);
      expect(add.stdout).toContain(`type \\"${type}\\" is the multus meta-plugin itself`);
      expect(d.log()).toContain(`ADD ${world.containerId}: 400`);
      expect(await world.podLinks()).toEqual(['lo']);
      const del = await world.driver('del', conf);
      expect(del.code, describeRun(del)).toBe(0);
      expect(await reservedIps(world.ipamDir)).toEqual([]);
    });

    it('with the daemon down the shim falls back to the thin plugin', async () => {
      installShim(OUR_SHIM);
      const d = await startDaemon(mode);
      d.child.kill('SIGTERM');
      expect(await d.exited).toBe(0);
      const { conf } = await shimConf('1.0.0');
      const add = await world.driver('add', conf);
      expect(add.code, describeRun(add)).toBe(0);
      expect(await ipv4Of(world.podNs, 'eth0')).toHaveLength(1);
      expect(served(d, 'ADD')).toBe(false);
      const del = await world.driver('del', conf);
      expect(del.code, describeRun(del)).toBe(0);
      expect(await world.podLinks()).toEqual(['lo']);
      expect(await reservedIps(world.ipamDir)).toEqual([]);
    });

    it('the daemon killed during an ADD: the ADD fails, then DEL (thin fallback) cleans everything', async () => {
      installShim(OUR_SHIM);
      installSlowPlugin();
      const d = await startDaemon(mode);
      const { conf } = await shimConf('1.0.0', [{ type: 'slow' }]);
      const add = world.driver('add', conf);
      for (let i = 0; i < 1000 && !existsSync(join(world.dir, 'started')); i++) {
        await new Promise((r) => setTimeout(r, 10));
      }
      expect(existsSync(join(world.dir, 'started'))).toBe(true);
      expect(await ipv4Of(world.podNs, 'eth0')).toHaveLength(1); // bridge ran before the slow plugin
      d.child.kill('SIGKILL');
      await d.exited;
      const failed = await add;
      expect(failed.code, describeRun(failed)).not.toBe(0);
      writeFileSync(join(world.dir, 'release'), '');
      // The socket file is left behind (SIGKILL), refusing connections: the shim falls back for DEL.
      const del = await world.driver('del', conf);
      expect(del.code, describeRun(del)).toBe(0);
      expect(await world.podLinks()).toEqual(['lo']);
      expect(await reservedIps(world.ipamDir)).toEqual([]);
    });
  },
);

// caller mode only: the shim runs the delegates, so its outcome and its death are the daemon's concern
describe.skipIf(!withOurShim)('resident mode through build/multus-shim, delegateExec caller only', () => {
  // the delegate's outcome comes on a new connection: the socket stays open past the drain until the call ends
  it('SIGTERM during an ADD whose shim runs the slow delegate: the ADD completes', async () => {
    installShim(OUR_SHIM);
    installSlowPlugin();
    const d = await startDaemon('caller');
    const { conf } = await shimConf('1.0.0', [{ type: 'slow' }]);
    const add = world.driver('add', conf);
    const started = join(world.dir, 'started');
    for (let i = 0; i < 1000 && !existsSync(started); i++) await new Promise((r) => setTimeout(r, 10));
    d.child.kill('SIGTERM');
    await new Promise((r) => setTimeout(r, 3000)); // past the 2 s drain
    writeFileSync(join(world.dir, 'release'), '');
    const done = await add;
    expect(done.code, describeRun(done)).toBe(0);
    expect(await d.exited).toBe(0);
    const del = await world.driver('del', conf); // the thin fallback: the daemon is gone
    expect(del.code, describeRun(del)).toBe(0);
    expect(await world.podLinks()).toEqual(['lo']);
    expect(await reservedIps(world.ipamDir)).toEqual([]);
  });

  it('the shim killed during an ADD: the daemon rolls the ADD back itself', async () => {
    installShim(OUR_SHIM);
    installSlowPlugin();
    const d = await startDaemon('caller');
    const { conf } = await shimConf('1.0.0', [{ type: 'slow' }]);
    const add = world.driver('add', conf);
    const started = join(world.dir, 'started');
    for (let i = 0; i < 1000 && !(existsSync(started) && readFileSync(started, 'utf8').trim()); i++) {
      await new Promise((r) => setTimeout(r, 10));
    }
    const shimPid = Number(readFileSync(started, 'utf8')); // the slow plugin's parent: the shim
    expect(readFileSync(`/proc/${shimPid}/comm`, 'utf8').trim()).toBe('multus-shim');
    expect(await ipv4Of(world.podNs, 'eth0')).toHaveLength(1);
    process.kill(shimPid, 'SIGKILL');
    const failed = await add;
    expect(failed.code, describeRun(failed)).not.toBe(0);
    for (let i = 0; i < 1000 && !d.log().includes(`ADD ${world.containerId}: 500`); i++) {
      await new Promise((r) => setTimeout(r, 10));
    }
    expect(d.log()).toContain(`ADD ${world.containerId}: 500`);
    // the rollback ran in the daemon, without the runtime's DEL
    expect(await world.podLinks()).toEqual(['lo']);
    expect(await reservedIps(world.ipamDir)).toEqual([]);
  });
});

// it does not offer to run delegates: a daemon in caller mode runs them itself
describe.skipIf(!withUpstreamShim).each(['daemon', 'caller'] as const)(
  "resident mode through Multus v4.3.0's multus-shim, delegateExec %s",
  (mode) => {
    it('ADD, CHECK and DEL against this daemon', async () => {
      installShim(UPSTREAM_SHIM);
      const d = await startDaemon(mode);
      const { conf } = await shimConf('1.0.0');
      await addCheckDel(d, conf);
    });
  },
);
