/**
 * operator/status-cli.ts: `kubectl multus status POD [-n NS] [-o json]`: the pod's network-status annotation
 * (docs/behaviour.md, "network-status") as a table: interface, network, IPs, MAC, default, device (the PCI
 * address, or the device-info's other address). `-o json` prints the entries as the annotation holds them.
 * Exit 0; 2 when the pod cannot be read; 1 when it has no network-status yet.
 * Tested by test/cli/kubectl-multus.test.ts (the table), test/e2e-k8s/kubectl-multus.test.ts.
 */
import { isObject } from '../base/json.ts';
import type { NetworkStatus } from '../multus/network-status.ts';
import { NETWORK_STATUS_ANNOTATION, parseStatusEntries } from '../multus/network-status.ts';
import type { KubectlDeps, KubectlFlags } from './kubectl-common.ts';
import { UsageError, connect } from './kubectl-common.ts';

/** The device of an entry: device-info's PCI address, else its vhost-user or other first address. */
function deviceOf(s: NetworkStatus): string {
  const info = s['device-info'];
  if (!isObject(info)) return '';
  for (const section of Object.values(info)) {
    if (!isObject(section)) continue;
    for (const key of ['pci-address', 'socketpath', 'rdma-device']) {
      const v = section[key];
      if (typeof v === 'string' && v) return v;
    }
  }
  return typeof info.type === 'string' ? info.type : '';
}

/** The table, columns padded to their widest cell. */
export function formatStatusTable(entries: readonly NetworkStatus[]): string {
  const rows = [
    ['INTERFACE', 'NETWORK', 'IPS', 'MAC', 'DEFAULT', 'DEVICE'],
    ...entries.map((s) => [
      s.interface ?? '',
      s.name,
      (s.ips ?? []).join(',') || '-',
      s.mac ?? '',
      s.default ? 'true' : 'false',
      deviceOf(s),
    ]),
  ];
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => r[c]!.length)));
  return (
    rows
      .map((r) =>
        r
          .map((cell, c) => cell.padEnd(widths[c]!))
          .join('  ')
          .trimEnd(),
      )
      .join('\n') + '\n'
  );
}

export async function runStatus(flags: KubectlFlags, deps: KubectlDeps): Promise<number> {
  if (flags.args.length !== 1) throw new UsageError('status needs one pod name');
  const { kube, namespace } = await connect(flags, deps.env);
  try {
    const pod = await kube.getPod(namespace, flags.args[0]!);
    const raw = pod.metadata.annotations?.[NETWORK_STATUS_ANNOTATION];
    const entries = parseStatusEntries(raw);
    if (flags.output === 'json') deps.io.stdout(`${JSON.stringify(entries, null, 2)}\n`);
    else if (entries.length > 0) deps.io.stdout(formatStatusTable(entries));
    if (entries.length > 0) return 0;
    deps.io.stderr(`pod ${namespace}/${pod.metadata.name} has no ${NETWORK_STATUS_ANNOTATION} annotation yet\n`);
    return 1;
  } finally {
    kube.close();
  }
}
