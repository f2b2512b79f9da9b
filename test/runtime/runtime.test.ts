/**
 * The runtime fixtures themselves (runtime.ts, crio.ts), without multus or Kubernetes: containerd or CRI-O
 * starts in its own namespace and temp dir, `crictl runp` makes a sandbox with a plain bridge network from the
 * fixture's conf dir, and `stop()` leaves nothing even when the runtime was killed with sandboxes still running
 * (the case of a failed test): no process (pause, shim or conmon), mount, cgroup, namespace or temp dir.
 */
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { needs } from '../helpers/skip.ts';
import { crioRequirements, prepareCrio } from './crio.ts';
import { type Runtime, ipInSandbox, keepTmp, prepareRuntime, runOk, runtimeRequirements } from './runtime.ts';

const ready = needs(...runtimeRequirements());
const crioReady = ready && needs(...crioRequirements());

/** PIDs of live processes whose command line names `text`. */
function processesNaming(text: string): number[] {
  const found: number[] = [];
  for (const p of readdirSync('/proc').filter((n) => /^\d+$/.test(n))) {
    try {
      if (readFileSync(`/proc/${p}/cmdline`, 'utf8').includes(text) && alive(Number(p))) found.push(Number(p));
    } catch {
      // gone
    }
  }
  return found;
}

/** A live (not zombie) process with this PID. */
function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

describe.skipIf(!ready)(
  'runtime fixture: containerd or CRI-O + runc + crictl in a temp dir and a namespace of its own',
  () => {
    let rt: Runtime | undefined;
    afterEach(async () => {
      await rt?.stop();
      rt = undefined;
    });

    for (const kind of ['containerd', 'crio'] as const) {
      it.skipIf(kind === 'crio' && !crioReady)(
        `${kind}: runp gets the conf dir's network; stop() after ${kind} died with a sandbox running leaves nothing`,
        async () => {
          rt = kind === 'crio' ? await prepareCrio() : await prepareRuntime();
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

          // a test that failed: the runtime gone, the shim (conmon) and the sandbox still running
          await rt.stopContainerd();
          expect(alive(sb.pid), `the sandbox outlives ${kind}`).toBe(true);
          if (kind === 'crio') expect(processesNaming(`${rt.dir}/`).length, 'conmon and pause').toBeGreaterThan(0);
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
          const caches = (await readdir('/var/lib/cni/results').catch(() => [] as string[])).filter((f) =>
            f.includes(sb.id),
          );
          expect(caches, "the runtime's libcni caches of the sandbox").toEqual([]);
          expect(processesNaming(`${dir}/`), 'processes naming the temp dir').toEqual([]);
        },
      );
    }
  },
);
