/**
 * The daemon stays out of the thin plugin: build/multus.cjs (the bundle every CNI call loads) holds none of
 * the daemon's code, which lives in build/multus-daemon.cjs (a SEA asset evaluated only for `multus daemon`).
 * The daemon's informers watch through the lean client: no @kubernetes/client-node in its bundle (docs/resident.md).
 * The gRPC library is in build/kubelet-grpc.cjs alone, loaded when a call asks the kubelet (src/kubelet/README.md).
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { fileExists, needs } from '../helpers/skip.ts';

const THIN = resolve('build/multus.cjs');
const DAEMON = resolve('build/multus-daemon.cjs');
const KUBELET = resolve('build/kubelet-grpc.cjs');
// Strings of @grpc/grpc-js (its header, its size error), protobufjs (its reader's error) and our .proto text.
const GRPC_MARKERS = [
  'grpc-accept-encoding',
  'Received message larger than max',
  'index out of range',
  'PodResourcesLister',
];
// Strings that only the daemon's modules contain.
// hot-plug, dynamic networks and `multus plan` (docs/hotplug.md) live in the daemon's bundle too.
const MARKERS = [
  'the multus daemon must run as root',
  'does not serve /delegate',
  'is already attached to the pod by',
  'NetworkChangeFailed',
  'the ADD would go ahead',
  // `multus install` and `--is-default-ready` (docs/install.md) too.
  'cleanup-config-on-exit',
  // the daemon's page drop at rest opens its own FFI (daemon/pages.ts): the thin plugin never compiles that stub
  'madvise',
];

describe('bundles', () => {
  const built = needs(fileExists(THIN, 'the built bundle (npm run build)'), fileExists(DAEMON, 'the daemon bundle'));
  it.runIf(built)('the thin bundle has no daemon code; the daemon bundle has it', () => {
    const thin = readFileSync(THIN, 'utf8');
    const daemon = readFileSync(DAEMON, 'utf8');
    for (const m of MARKERS) {
      expect(thin).not.toContain(m);
      expect(daemon).toContain(m);
    }
    expect(thin).toContain('multus-daemon.cjs'); // only the loader's asset name
  });
  it.runIf(built && needs(fileExists(KUBELET, 'the kubelet bundle')))(
    'the gRPC library and the protos are in the kubelet bundle, in neither the thin nor the daemon bundle',
    () => {
      const kubelet = readFileSync(KUBELET, 'utf8');
      for (const file of [THIN, DAEMON]) {
        const text = readFileSync(file, 'utf8');
        for (const m of GRPC_MARKERS) expect(text, `${file} has ${m}`).not.toContain(m);
        expect(text).toContain('kubelet-grpc.cjs'); // only the loader's asset name
      }
      for (const m of GRPC_MARKERS) expect(kubelet).toContain(m);
    },
  );
  it.runIf(built)("the daemon bundle has none of client-node's informer classes (ListWatch, Watch, node-fetch)", () => {
    const daemon = readFileSync(DAEMON, 'utf8');
    for (const m of [
      'Connection closed on server',
      'No currently active cluster',
      'applyToFetchOptions',
      'node-fetch',
    ]) {
      expect(daemon).not.toContain(m);
    }
  });
});
