/**
 * The resident mode's own CRI case (resident-cri.test.ts under containerd, resident-crio.test.ts under CRI-O):
 * hot-plug (docs/hotplug.md) into a sandbox the runtime made. `multus hotplug add` plugs the bridge NAD `gw`
 * into the running sandbox through the daemon's `/delegate`; the interface, its IP, its host veth and the pod's
 * network-status are there; then the runtime's own `stopp` + `rmp` (the CNI DEL of the pod, which knows nothing
 * of the hot-plug) leave nothing: no link, no IP reserved in host-local's dir, no cache.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { networkStatus } from '../e2e-k8s/world.ts';
import { type CriSuite, v4 } from './cri-suite.ts';
import { MULTUS_BIN, run } from './runtime.ts';

export function hotplugCase(s: CriSuite): void {
  it('hot-plug of a NAD into a running sandbox (multus hotplug), then stopp/rmp removes it too', async () => {
    const p = await s.pod('pod-hotplug', {});
    const sb = await s.runp(p);
    expect([...(await s.links(sb)).keys()].sort()).toEqual(['eth0', 'lo']);
    const ipsBefore = await s.reservedIps();
    const hostBefore = await s.hostLeftovers();

    // the CLI only reads multus' caches and talks to the daemon's socket: no need to enter the runtime's netns
    const daemon = s.daemon!;
    const add = await run(MULTUS_BIN, [
      'hotplug',
      'add',
      '--pod',
      `${p.namespace}/${p.name}`,
      '--network',
      'gw@net1',
      '--socket-dir',
      daemon.socketDir,
      '--conf',
      daemon.generatedConf,
    ]);
    expect(add.code, `multus hotplug add: ${add.stdout}${add.stderr}`).toBe(0);
    const result = JSON.parse(add.stdout) as { ips?: { address: string }[] };
    const address = result.ips?.[0]?.address;
    expect(address).toMatch(/^10\.250\.2\.\d+\/24$/);
    expect(daemon.lines(`/delegate ADD ${sb.id} net1: 200`), 'the hot-plug served by the daemon').toHaveLength(1);

    // in the sandbox, on the host side, in host-local's dir, in the API, in the caches
    const l = await s.links(sb);
    expect([...l.keys()].sort()).toEqual(['eth0', 'lo', 'net1']);
    expect(l.get('net1')?.linkinfo?.info_kind).toBe('veth');
    expect(v4(l.get('net1'))).toEqual([address]);
    const hostNew = (await s.hostLeftovers()).filter((x) => !hostBefore.includes(x));
    expect(hostNew, "net1's host end in containerd's namespace").toEqual([expect.stringMatching(/\(veth\)$/)]);
    const ipsNew = (await s.reservedIps()).filter((x) => !ipsBefore.includes(x));
    expect(ipsNew, "net1's IP reserved by host-local").toEqual([`gw/${address!.split('/')[0]}`]);
    const status = await networkStatus(s.cluster, p);
    expect(status?.map((e) => [e.name, e.interface, e.ips, e.default === true])).toEqual([
      ['rt-cluster', 'eth0', v4(l.get('eth0')).map((a) => a.split('/')[0]), true],
      [`${s.ns}/gw`, 'net1', [address!.split('/')[0]], false],
    ]);
    const scratchPath = join(s.cniDir, sb.id);
    const scratch = JSON.parse(readFileSync(scratchPath, 'utf8')) as { Name: string }[];
    expect(
      scratch.map((d) => d.Name),
      'the scratch cache owns the hot-plugged attachment',
    ).toEqual(['rt-cluster', `${s.ns}/gw`]);
    expect(await s.cachesOf(sb.id)).toContain(join(s.cniDir, 'results', `gw-${sb.id}-net1`));

    // the runtime's teardown: the DEL of the pod through the shim (containerd may send it more than once),
    // served by the daemon
    await s.teardown(sb.id);
    expect(daemon.lines(`DEL ${sb.id}: 200`), "the runtime's DELs served by the daemon").not.toEqual([]);
    expect(existsSync(scratchPath), 'the scratch cache').toBe(false);
    await s.expectNothingLeft([sb.id]);
  });
}
