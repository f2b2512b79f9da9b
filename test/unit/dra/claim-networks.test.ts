/**
 * dra/claim-networks.ts: what a claim of our driver asks to attach (docs/behaviour.md#claim-networks): both opaque
 * kinds, the DeviceClass's config against the claim's, the opt-in for a claim's inline config, the meta-plugin
 * refusal, a per-NAD device without config, a request without config, other drivers' results left alone.
 */
import { describe, expect, it } from 'vitest';
import type { ClaimNetworkOptions } from '../../../src/dra/claim-networks.ts';
import {
  CNI_DRA_DRIVER_API,
  DEFAULT_DRA_DRIVER,
  NETWORK_SELECTION_API,
  claimNetworks,
  inlineNetwork,
} from '../../../src/dra/claim-networks.ts';
import type { DraObject } from '../../../src/k8s/types.ts';

const D = DEFAULT_DRA_DRIVER;
const OPTS: ClaimNetworkOptions = { driver: D, allowInlineFromClaim: false };

interface R {
  request: string;
  device?: string;
  driver?: string;
  shareID?: string;
}
interface C {
  source?: 'FromClass' | 'FromClaim';
  requests?: string[];
  driver?: string;
  parameters: unknown;
}

function claim(results: R[], configs: C[] = []): DraObject {
  return {
    metadata: { namespace: 'team', name: 'c1', uid: 'uid-1' },
    status: {
      allocation: {
        devices: {
          results: results.map((r) => ({ driver: D, pool: 'node-1', device: 'any', ...r })),
          config: configs.map((c) => ({
            source: c.source ?? 'FromClaim',
            ...(c.requests ? { requests: c.requests } : {}),
            opaque: { driver: c.driver ?? D, parameters: c.parameters },
          })),
        },
      },
    },
  };
}

const sel = (extra: Record<string, unknown>) => ({
  apiVersion: NETWORK_SELECTION_API,
  kind: 'NetworkSelection',
  ...extra,
});
const BRIDGE = { cniVersion: '1.0.0', name: 'br', type: 'bridge', ipam: { type: 'host-local', subnet: '10.9.0.0/24' } };
const cni = (extra: Record<string, unknown>) => ({ apiVersion: CNI_DRA_DRIVER_API, kind: 'CNI', ...extra });

describe('claimNetworks: our NetworkSelection', () => {
  it('reads the element with the annotation parser; namespace defaults to the claim’s', () => {
    const out = claimNetworks(
      claim(
        [{ request: 'net', shareID: 's-1' }],
        [{ parameters: sel({ name: 'macvlan', interface: 'net7', ips: ['10.1.1.5/24'] }) }],
      ),
      OPTS,
    );
    expect(out.errors).toEqual([]);
    expect(out.attachments).toEqual([
      {
        claim: { namespace: 'team', name: 'c1', uid: 'uid-1' },
        request: 'net',
        driver: D,
        pool: 'node-1',
        device: 'any',
        shareId: 's-1',
        config: {
          kind: 'nad',
          selection: { name: 'macvlan', namespace: 'team', request: { ifname: 'net7', ips: ['10.1.1.5/24'] } },
        },
      },
    ]);
  });

  it('gives the annotation parser’s message, naming claim and request', () => {
    const out = claimNetworks(claim([{ request: 'net' }], [{ parameters: sel({ name: 'm', mac: 'zz' }) }]), OPTS);
    expect(out.attachments).toEqual([]);
    expect(out.errors).toHaveLength(1);
    expect(out.errors[0]).toMatchObject({ claim: 'team/c1', request: 'net', reason: 'InvalidConfig' });
    expect(out.errors[0]!.message).toMatch(
      /^ResourceClaim team\/c1 request net \(device any\): parsePodNetworkAnnotation: failed to mac/,
    );
  });

  it('a request with no config is an error naming claim and request, and what to add', () => {
    const out = claimNetworks(claim([{ request: 'net' }]), OPTS);
    expect(out.errors).toEqual([expect.objectContaining({ claim: 'team/c1', request: 'net', reason: 'NoConfig' })]);
    expect(out.errors[0]!.message).toContain('add a dra.multus.k8s.cni.cncf.io/v1alpha1 NetworkSelection');
  });

  it('an unknown kind of parameters is refused with the two it knows', () => {
    const out = claimNetworks(claim([{ request: 'net' }], [{ parameters: { apiVersion: 'x/v1', kind: 'Y' } }]), OPTS);
    expect(out.errors[0]!.message).toMatch(/unknown opaque parameters "x\/v1 Y": write apiVersion/);
  });

  it('keeps only our driver’s results and configs; another driver’s claim is nothing to us', () => {
    const out = claimNetworks(
      claim(
        [{ request: 'gpu', driver: 'gpu.example.com' }, { request: 'net' }],
        [{ driver: 'gpu.example.com', parameters: { x: 1 } }, { parameters: sel({ name: 'm' }) }],
      ),
      OPTS,
    );
    expect(out.errors).toEqual([]);
    expect(out.attachments.map((a) => a.request)).toEqual(['net']);
    expect(claimNetworks(claim([{ request: 'gpu', driver: 'gpu.example.com' }]), OPTS)).toEqual({
      attachments: [],
      errors: [],
    });
  });

  it('an unallocated claim is an error', () => {
    const out = claimNetworks({ metadata: { namespace: 'team', name: 'c1' }, status: {} }, OPTS);
    expect(out.errors).toEqual([expect.objectContaining({ claim: 'team/c1', reason: 'NotAllocated' })]);
  });
});

describe('claimNetworks: the DeviceClass’s config and the claim’s', () => {
  it('applies configs to all requests or the named ones; the claim’s wins over the class’s for the same request', () => {
    const configs: C[] = [
      { parameters: sel({ name: 'from-claim' }), requests: ['a'] },
      { source: 'FromClass', parameters: sel({ name: 'from-class' }) },
    ];
    const out = claimNetworks(claim([{ request: 'a' }, { request: 'b' }], configs), OPTS);
    expect(out.attachments.map((a) => a.config.kind === 'nad' && a.config.selection.name)).toEqual([
      'from-claim',
      'from-class',
    ]);
  });

  it('a subrequest takes the config of its parent request', () => {
    const out = claimNetworks(
      claim([{ request: 'a/fast' }], [{ parameters: sel({ name: 'n' }), requests: ['a'] }]),
      OPTS,
    );
    expect(out.attachments.map((a) => a.request)).toEqual(['a/fast']);
  });
});

describe('claimNetworks: cni-dra-driver’s CNI config', () => {
  it('is honoured from the DeviceClass, as an object or a JSON or YAML string', () => {
    for (const config of [BRIDGE, JSON.stringify(BRIDGE), 'cniVersion: 1.0.0\nname: br\ntype: bridge\n']) {
      const out = claimNetworks(
        claim([{ request: 'n' }], [{ source: 'FromClass', parameters: cni({ ifName: 'eth9', config }) }]),
        OPTS,
      );
      expect(out.errors).toEqual([]);
      expect(out.attachments[0]!.config).toMatchObject({
        kind: 'inline',
        ifName: 'eth9',
        fromClass: true,
        config: { type: 'bridge' },
      });
    }
  });

  it('from the claim itself: refused unless the administrator opts in', () => {
    const c = claim([{ request: 'n' }], [{ parameters: cni({ config: BRIDGE }) }]);
    const refused = claimNetworks(c, OPTS);
    expect(refused.errors).toEqual([expect.objectContaining({ request: 'n', reason: 'InlineConfigNotAllowed' })]);
    expect(refused.errors[0]!.message).toContain('draInlineConfigFromClaims');
    const allowed = claimNetworks(c, { ...OPTS, allowInlineFromClaim: true });
    expect(allowed.errors).toEqual([]);
    expect(allowed.attachments[0]!.config).toEqual({ kind: 'inline', config: BRIDGE, fromClass: false });
  });

  it.each(['multus', 'multus-shim'])('refuses the meta-plugin %s, even from the DeviceClass', (type) => {
    const list = { cniVersion: '1.0.0', name: 'x', plugins: [{ type: 'bridge' }, { type }] };
    const out = claimNetworks(
      claim([{ request: 'n' }], [{ source: 'FromClass', parameters: cni({ config: list }) }]),
      OPTS,
    );
    expect(out.errors[0]!.message).toContain(`type "${type}" is the multus meta-plugin itself`);
  });

  it('refuses a bad ifName and a config that is not a CNI config', () => {
    const bad = (p: Record<string, unknown>) =>
      claimNetworks(claim([{ request: 'n' }], [{ source: 'FromClass', parameters: cni(p) }]), OPTS).errors[0]?.message;
    expect(bad({ ifName: 'a/b', config: BRIDGE })).toMatch(/interface name/i);
    expect(bad({ config: 5 })).toContain('"config" must be a CNI config or conflist');
    expect(bad({ config: '[1' })).toContain('"config" is not JSON or plain block YAML');
    expect(bad({ config: { name: 'x' } })).toMatch(/the inline CNI config/);
  });

  it('inlineNetwork names an unnamed config <claim>-<request>', () => {
    expect(inlineNetwork({ cniVersion: '1.0.0', type: 'bridge' }, 'c1', 'a/fast').name).toBe('c1-a-fast');
  });
});

describe('claimNetworks: a per-NAD device', () => {
  const deviceNetwork = (pool: string, device: string) =>
    pool === 'node-1' && device === 'macvlan-team-0123456789' ? { namespace: 'team', name: 'macvlan' } : undefined;
  const opts = { ...OPTS, deviceNetwork };
  const DEV = 'macvlan-team-0123456789';

  it('without a config attaches that NAD', () => {
    const out = claimNetworks(claim([{ request: 'n', device: DEV }]), opts);
    expect(out.attachments[0]!.config).toEqual({
      kind: 'nad',
      selection: { namespace: 'team', name: 'macvlan', request: {} },
    });
  });

  it('a NetworkSelection adds requests; a name or namespace it sets must be the device’s', () => {
    const ok = claimNetworks(
      claim([{ request: 'n', device: DEV }], [{ parameters: sel({ interface: 'fast0' }) }]),
      opts,
    );
    expect(ok.attachments[0]!.config).toEqual({
      kind: 'nad',
      selection: { namespace: 'team', name: 'macvlan', request: { ifname: 'fast0' } },
    });
    const bad = claimNetworks(claim([{ request: 'n', device: DEV }], [{ parameters: sel({ name: 'other' }) }]), opts);
    expect(bad.errors[0]!.message).toContain(
      `the NetworkSelection's name "other" is not the device's network team/macvlan`,
    );
  });

  it('an inline config cannot replace the device’s network; an unknown device is an error', () => {
    const inline = claimNetworks(
      claim([{ request: 'n', device: DEV }], [{ source: 'FromClass', parameters: cni({ config: BRIDGE }) }]),
      opts,
    );
    expect(inline.errors[0]!.message).toContain('an inline CNI config cannot replace it');
    const unknown = claimNetworks(claim([{ request: 'n', device: 'gone-team-9999999999' }]), opts);
    expect(unknown.errors).toEqual([expect.objectContaining({ reason: 'UnknownDevice' })]);
  });

  it('one bad request makes the claim attach nothing', () => {
    const out = claimNetworks(claim([{ request: 'good', device: DEV }, { request: 'bad' }]), opts);
    expect(out).toEqual({ attachments: [], errors: [expect.objectContaining({ request: 'bad', reason: 'NoConfig' })] });
  });
});
