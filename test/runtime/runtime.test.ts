/**
 * The runtime fixture itself (runtime.ts), without multus or Kubernetes: containerd starts in its own
 * namespace and temp dir, `crictl runp` makes a sandbox with a plain bridge network from the fixture's conf
 * dir, and `stop()` leaves nothing even when containerd was killed with sandboxes still running (the case of
 * a failed test): no process, mount, cgroup, namespace or temp dir.
 */
import { existsSync, readFileSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { needs } from '../helpers/skip.ts';
import { type Runtime, ipInSandbox, keepTmp, prepareRuntime, runOk, runtimeRequirements } from './runtime.ts';

const ready = needs(...runtimeRequirements());

/** A live (not zombie) process with this PID. */
function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

describe.skipIf(!ready)('runtime fixture: containerd + runc + crictl in a temp dir and a namespace of its own', () => {
  let rt: Runtime | undefined;
  afterEach(async () => {
    await rt?.stop();
    rt = undefined;
  });

  it("runp: the conf dir's network; stop() after containerd died with a sandbox running leaves nothing", async () => {
    rt = await prepareRuntime();
    const ipam = join(rt.dir, 'ipam');
    await rt.writeConf('10-bridge.conflist', {
      cniVersion: '1.0.0',
      name: 'rt-smoke',
      plugins: [
        {
          type: 'bridge',
          bridge: 'mtsrtsm0',
          isGateway: true,
          ipam: { type: 'host-local', dataDir: ipam, subnet: '10.251.0.0/24' },
        },
      ],
    });
    await rt.start();
    const r = await rt.runp({ name: 'smoke', namespace: 'default', uid: 'uid-smoke' });
    expect(r.code, `${r.stderr}\n${await rt.logTail()}`).toBe(0);
    const sb = await rt.inspect(r.id!);
    expect(sb.netns.startsWith(rt.netnsDir)).toBe(true);
    expect(await ipInSandbox(sb, ['-4', '-o', 'addr', 'show', 'dev', 'eth0'])).toContain('10.251.0.2/24');
    expect(await runOk('ip', ['-n', rt.hostNs, '-o', 'link', 'show', 'mtsrtsm0'])).toContain('mtsrtsm0');
    expect(alive(sb.pid), 'the pause process runs').toBe(true);
    const cgroups = `/sys/fs/cgroup/memory/${rt.cgroupParent}`;
    expect(existsSync(cgroups), 'the sandbox cgroup parent').toBe(true);

    // a test that failed: containerd gone, the shim and the sandbox still running
    await rt.stopContainerd();
    expect(alive(sb.pid), 'the sandbox outlives containerd').toBe(true);
    const { dir, hostNs } = rt;
    await rt.stop();
    rt = undefined;
    expect(alive(sb.pid), 'the pause process').toBe(false);
    const mounts = readFileSync('/proc/self/mountinfo', 'utf8')
      .split('\n')
      .filter((l) => l.includes(`${dir}/`));
    expect(mounts, 'mounts below the temp dir').toEqual([]);
    expect(existsSync(cgroups), 'the cgroup parent').toBe(false);
    expect(
      (await readdir('/var/run/netns')).filter((n) => n === hostNs),
      "containerd's namespace",
    ).toEqual([]);
    expect(existsSync(dir), 'the temp dir (kept with MULTUS_TS_KEEP_TMP=1)').toBe(keepTmp);
    const caches = (await readdir('/var/lib/cni/results').catch(() => [] as string[])).filter((f) => f.includes(sb.id));
    expect(caches, "containerd's libcni caches of the sandbox").toEqual([]);
  });
});
