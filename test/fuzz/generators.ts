/**
 * Generators of the fuzzing suite (fast-check): whole CNI calls — command, environment, CNI_ARGS, stdin, the
 * pod's annotations, NAD configs, cache files on disk and how each fake delegate answers. Valid shapes are
 * generated first and then damaged (wrong types, deep nesting, huge values, missing keys), so most cases get
 * past the first check and reach the deeper code.
 */
import fc from 'fast-check';

export const PLUGIN_TYPES = ['p0', 'p1', 'p2'] as const;
const GOOD_VERSIONS = ['0.3.1', '0.4.0', '1.0.0', '1.1.0'];
const VERSIONS = [
  ...GOOD_VERSIONS,
  ...GOOD_VERSIONS,
  ...GOOD_VERSIONS,
  '0.1.0',
  '0.2.0',
  '0.3.0',
  '',
  '2.0.0',
  '1.0',
  'x',
];
const CODES = [1, 2, 3, 4, 5, 6, 7, 8, 11, 50, 51, 999, 100, 4242];

/** Any JSON value, sometimes large. */
const anyJson = fc.oneof(
  { weight: 4, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
  { weight: 1, arbitrary: fc.string({ minLength: 1000, maxLength: 2000 }).map((s) => s.repeat(20)) },
);

const name = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom('net-a', 'net-b', 'cluster', 'macvlan-conf', 'k8s-pod-network') },
  { weight: 1, arbitrary: fc.constantFrom('', '.', '..', '../x', 'a/b', 'a\0b', '-x', 'A'.repeat(300)) },
  { weight: 1, arbitrary: fc.string({ maxLength: 12 }) },
);

const pluginType = fc.oneof(
  { weight: 8, arbitrary: fc.constantFrom(...PLUGIN_TYPES) },
  { weight: 1, arbitrary: fc.constantFrom('missing', '../p0', '/bin/sh', '', 'p0/..') },
);

const plugin = fc.record(
  {
    type: pluginType,
    capabilities: fc.dictionary(fc.constantFrom('portMappings', 'bandwidth', 'ips', 'mac', 'x'), fc.boolean()),
    ipam: fc.constant({ type: 'host-local' }),
  },
  { requiredKeys: ['type'] },
);

/** A delegate network: a single plugin config or a conflist. */
const delegate = fc.oneof(
  fc.record({ cniVersion: fc.constantFrom(...VERSIONS), name, plugin }).map(({ cniVersion, name, plugin }) => ({
    cniVersion,
    name,
    ...plugin,
  })),
  fc.record({ cniVersion: fc.constantFrom(...VERSIONS), name, plugins: fc.array(plugin, { maxLength: 3 }) }),
);

/** Replace, delete or retype keys at random places of a value. */
function damage<T>(arb: fc.Arbitrary<T>): fc.Arbitrary<unknown> {
  return fc
    .tuple(arb, fc.array(fc.tuple(fc.nat(), fc.oneof(anyJson, fc.constant(undefined))), { maxLength: 3 }))
    .map(([v, edits]) => {
      const copy = structuredClone(v) as unknown;
      for (const [at, value] of edits) {
        const objects: Record<string, unknown>[] = [];
        const walk = (x: unknown) => {
          if (x && typeof x === 'object') {
            objects.push(x as Record<string, unknown>);
            for (const y of Object.values(x)) walk(y);
          }
        };
        walk(copy);
        const target = objects[at % Math.max(objects.length, 1)];
        if (!target) continue;
        const keys = Object.keys(target);
        const key = keys.length > 0 && at % 3 !== 0 ? keys[at % keys.length]! : `k${at % 5}`;
        if (value === undefined) delete target[key];
        else target[key] = value;
      }
      return copy;
    });
}

export interface Dirs {
  cniDir: string;
  confDir: string;
  netns: string;
  readiness: string;
}

/** A multus config; `kube` decides whether it names a kubeconfig (the fake API then serves it). */
export function multusConf(d: Dirs) {
  return fc
    .record(
      {
        cniVersion: fc.oneof(
          { weight: 6, arbitrary: fc.constantFrom(...GOOD_VERSIONS) },
          { weight: 1, arbitrary: fc.constantFrom(...VERSIONS) },
        ),
        name: fc.constant('multus-cni-network'),
        type: fc.constant('multus'),
        delegates: fc.array(delegate, { minLength: 1, maxLength: 3 }),
        kubeconfig: fc.constantFrom('/fake/kubeconfig', ''),
        clusterNetwork: fc.constantFrom('net-a', 'net-a', 'net-b', 'k8s-pod-network', '/nonexistent/x.conf', ''),
        defaultNetworks: fc.array(fc.constantFrom('net-b', 'kube-system/net-a', 'ns1/missing'), { maxLength: 2 }),
        systemNamespaces: fc.array(fc.constantFrom('kube-system', 'ns1'), { maxLength: 2 }),
        readinessindicatorfile: fc.constantFrom(d.readiness, ''),
        retryDeleteOnError: fc.boolean(),
        multusNamespace: fc.constantFrom('kube-system', 'ns1'),
        runtimeConfig: fc.record({
          portMappings: fc.array(fc.record({ hostPort: fc.integer(), containerPort: fc.integer() }), { maxLength: 2 }),
        }),
        'cni.dev/valid-attachments': fc.array(
          fc.record({ containerID: fc.constantFrom('cid1', 'cid2'), ifname: fc.constantFrom('eth0', 'net1') }),
          { maxLength: 2 },
        ),
      },
      { requiredKeys: ['cniVersion', 'name', 'type', 'delegates'] },
    )
    .map((c) => ({ ...c, cniDir: d.cniDir, confDir: d.confDir, binDir: '/opt/cni/bin' }));
}

/** Deep nesting that a recursive decoder would overflow on. */
const deepNesting = fc.tuple(fc.integer({ min: 1, max: 30_000 }), fc.constantFrom('[', '{"a":')).map(([n, open]) => {
  const close = open === '[' ? ']' : '}';
  return open.repeat(n) + '1' + close.repeat(n);
});

/** stdin bytes: a config (intact or damaged), any JSON, deep nesting, or plain garbage. */
export function stdin(d: Dirs): fc.Arbitrary<Buffer> {
  return fc.oneof(
    { weight: 8, arbitrary: multusConf(d).map((c) => Buffer.from(JSON.stringify(c))) },
    { weight: 3, arbitrary: damage(multusConf(d)).map((c) => Buffer.from(JSON.stringify(c) ?? '')) },
    { weight: 1, arbitrary: fc.json().map((s) => Buffer.from(s)) },
    { weight: 1, arbitrary: deepNesting.map((s) => Buffer.from(s)) },
    { weight: 1, arbitrary: fc.uint8Array({ maxLength: 200 }).map((b) => Buffer.from(b)) },
  );
}

const argKey = fc.constantFrom(
  'K8S_POD_NAMESPACE',
  'K8S_POD_NAME',
  'K8S_POD_UID',
  'K8S_POD_INFRA_CONTAINER_ID',
  'IgnoreUnknown',
  'IP',
  'FOO',
  '',
);
const argValue = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom('ns1', 'pod1', 'u1', 'cid1', '1', 'true', '10.1.0.5', 'kube-system') },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 10 }) },
  { weight: 1, arbitrary: fc.constantFrom('a=b', ';', '=', '\ufffd\ufffd', '\u0000', 'x'.repeat(5000)) },
);

/** CNI_ARGS: pairs (with duplicates and odd separators) joined with ';', or any string. */
export const cniArgs = fc.oneof(
  {
    weight: 6,
    arbitrary: fc
      .array(fc.tuple(argKey, argValue), { maxLength: 7 })
      .map((ps) => ps.map(([k, v]) => `${k}=${v}`).join(';')),
  },
  { weight: 1, arbitrary: fc.constantFrom('', ';', ';;', '=', 'K8S_POD_NAME', 'a=b=c;', 'IgnoreUnknown=1;') },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 40 }) },
);

const VALID_ARGS =
  'IgnoreUnknown=1;K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=pod1;K8S_POD_INFRA_CONTAINER_ID=cid1;K8S_POD_UID=u1';

/** A runtime's environment: valid most of the time, with one or two variables damaged or dropped otherwise. */
export function env(d: Dirs) {
  const bad: fc.Arbitrary<[string, string | undefined]> = fc.oneof(
    fc.tuple(
      fc.constant('CNI_CONTAINERID'),
      fc.constantFrom('', '..', '../../x', 'a/b', 'c'.repeat(300), '-', undefined),
    ),
    fc.tuple(fc.constant('CNI_NETNS'), fc.constantFrom('/proc/1/ns/does-not-exist', '', 'relative', undefined)),
    fc.tuple(fc.constant('CNI_IFNAME'), fc.constantFrom('', 'x'.repeat(16), '../a', 'a/b', '.', 'eth 0', undefined)),
    fc.tuple(fc.constant('CNI_PATH'), fc.constantFrom('', '/a:/b', undefined)),
    fc.tuple(fc.constant('CNI_ARGS'), fc.oneof(cniArgs, fc.constant(undefined))),
    fc.tuple(fc.constant('CNI_COMMAND'), fc.constantFrom('VERSION', '', 'add', 'BOGUS', undefined)),
  );
  return fc
    .record({
      command: fc.constantFrom('ADD', 'ADD', 'ADD', 'DEL', 'DEL', 'CHECK', 'STATUS', 'GC'),
      containerId: fc.constantFrom('cid1', 'cid1', 'cid2'),
      ifName: fc.constantFrom('eth0', 'eth0', 'net1'),
      args: fc.oneof({ weight: 4, arbitrary: fc.constant(VALID_ARGS) }, { weight: 1, arbitrary: cniArgs }),
      damage: fc.oneof(
        { weight: 3, arbitrary: fc.constant([]) },
        { weight: 1, arbitrary: fc.array(bad, { minLength: 1, maxLength: 2 }) },
      ),
    })
    .map(({ command, containerId, ifName, args, damage }) => {
      const e: Record<string, string | undefined> = {
        CNI_COMMAND: command,
        CNI_CONTAINERID: containerId,
        CNI_NETNS: d.netns,
        CNI_IFNAME: ifName,
        CNI_PATH: '/opt/cni/bin',
        CNI_ARGS: args,
      };
      for (const [k, v] of damage) e[k] = v;
      return e;
    });
}

/** The pod's network-selection annotation, in text or JSON form, valid or damaged. */
export const networksAnnotation = fc.oneof(
  fc
    .array(fc.constantFrom('net-a', 'ns1/net-b', 'net-a@net5', 'kube-system/net-a', 'missing', 'a/b/c', '@', ''), {
      maxLength: 3,
    })
    .map((l) => l.join(',')),
  damage(
    fc.array(
      fc.record(
        {
          name: fc.constantFrom('net-a', 'net-b', 'missing', ''),
          namespace: fc.constantFrom('ns1', 'kube-system', '../x'),
          interface: fc.constantFrom('net7', 'eth0', '', 'a/b'),
          ips: fc.array(fc.constantFrom('10.1.0.9/24', 'bogus'), { maxLength: 2 }),
          mac: fc.constantFrom('02:00:00:00:00:09', 'zz'),
          'default-route': fc.array(fc.constantFrom('10.1.0.1', 'x'), { maxLength: 1 }),
        },
        { requiredKeys: ['name'] },
      ),
      { maxLength: 3 },
    ),
  ).map((v) => JSON.stringify(v) ?? ''),
  fc.string({ maxLength: 30 }),
);

/** A NAD's spec.config: a delegate (intact or damaged), empty (then from confDir), or garbage. */
export const nadConfig = fc.oneof(
  delegate.map((d) => JSON.stringify(d)),
  damage(delegate).map((d) => JSON.stringify(d) ?? ''),
  fc.constantFrom('', '{', 'null', '[]'),
);

export const annotations = fc.record(
  {
    'k8s.v1.cni.cncf.io/networks': networksAnnotation,
    'v1.multus-cni.io/default-network': fc.constantFrom('net-a', 'ns1/net-b', 'missing', ''),
  },
  { requiredKeys: [] },
);

/** Files already in the cache dir: a scratch cache and result caches, intact-looking or garbage. */
export const cacheFiles = fc.array(
  fc.tuple(
    fc.constantFrom('cid1', 'cid2', 'results/net-a-cid1-eth0', 'results/cluster-cid2-eth0', 'results/net-b-cid1-net1'),
    fc.oneof(
      delegate.map((dl) =>
        JSON.stringify([
          {
            Conf: {},
            ConfList: {},
            Name: 'x',
            IsFilterV4Gateway: false,
            IsFilterV6Gateway: false,
            Bytes: Buffer.from(JSON.stringify(dl)).toString('base64'),
          },
        ]),
      ),
      delegate.map((dl) =>
        JSON.stringify({
          kind: 'cniCacheV1',
          containerId: 'cid1',
          ifName: 'eth0',
          networkName: 'net-a',
          config: Buffer.from(JSON.stringify(dl)).toString('base64'),
          result: { cniVersion: '1.0.0' },
        }),
      ),
      fc.json(),
      fc.constantFrom('', '[', '{"kind":"cniCacheV1"', '[{"Bytes":"!!"}]'),
    ),
  ),
  { maxLength: 3 },
);

/** How each fake delegate answers a command: the default success, a CNI error, garbage, or a bare failure. */
export const replies = fc.dictionary(
  fc.constantFrom(...PLUGIN_TYPES.flatMap((t) => ['ADD', 'DEL', 'CHECK', 'STATUS', 'GC'].map((c) => `${t} ${c}`))),
  fc.oneof(
    fc.constantFrom(...CODES).map((code) => ({ kind: 'error' as const, code })),
    fc.constantFrom('garbage', 'empty', 'exit2', 'oldresult', 'timeout').map((kind) => ({ kind })),
  ),
  { maxKeys: 3 },
);
