/**
 * multus/validate.ts, the one validator (ADD's planner over an in-memory client), and preflight's verdicts
 * (operator/preflight.ts `classify`): offline stand-ins, 'complete' NAD sets, the node's config, Go's leniency.
 */
import { describe, expect, it } from 'vitest';
import type { Nad, Pod } from '../../../src/k8s/types.ts';
import { parseMultusConf } from '../../../src/multus/conf.ts';
import { offlineConf, validateNad, validatePod } from '../../../src/multus/validate.ts';
import { preflightPod } from '../../../src/operator/preflight.ts';

const nad = (name: string, config: unknown, namespace = 'ns1'): Nad => ({
  metadata: { name, namespace },
  spec: { config: typeof config === 'string' ? config : JSON.stringify(config) },
});
const pod = (annotations: Record<string, string>, name = 'p'): Pod => ({
  metadata: { name, namespace: 'ns1', uid: '', annotations },
});
const NETS = 'k8s.v1.cni.cncf.io/networks';

describe('validateNad', () => {
  it('accepts a config and a conflist; an empty config is a warning (a node file)', () => {
    expect(validateNad(nad('a', { cniVersion: '1.0.0', type: 'bridge' }))).toEqual({ errors: [], warnings: [] });
    const list = { cniVersion: '1.0.0', name: 'l', plugins: [{ type: 'bridge' }] };
    expect(validateNad(nad('l', list)).errors).toEqual([]);
    const empty = validateNad({ metadata: { name: 'e', namespace: 'ns1' }, spec: { config: '' } });
    expect(empty.errors).toEqual([]);
    expect(empty.warnings[0]).toMatch(/spec.config is empty/);
  });

  it('warns of a name the text form cannot reach', () => {
    const v = validateNad(nad('dotted.name', { cniVersion: '1.0.0', type: 'bridge' }));
    expect(v.errors).toEqual([]);
    expect(v.warnings).toEqual([expect.stringMatching(/dotted.name: the name is not a DNS-1123 label/) as string]);
  });

  it('refuses what networkFromNad refuses, with its message and code', () => {
    const v = validateNad(nad('x', '{"type":'));
    expect(v.errors).toEqual([
      { code: 7, msg: expect.stringMatching(/^NetworkAttachmentDefinition ns1\/x: spec.config is not JSON/) as string },
    ]);
    expect(validateNad(nad('v', { cniVersion: '0.0.9', type: 'bridge' })).errors[0]!.code).toBe(1);
    expect(
      validateNad({ metadata: { name: 'n', namespace: 'ns1' }, spec: { config: 5 as never } }).errors[0]!.msg,
    ).toMatch(/must be a string/);
    expect(validateNad({ metadata: { namespace: 'ns1' } } as Nad).errors[0]!.msg).toMatch(/metadata.name is missing/);
  });
});

describe('validatePod', () => {
  it('offline, a NAD it lacks is a stand-in: the annotation is still checked', async () => {
    expect((await validatePod(pod({ [NETS]: 'elsewhere/x@net1, y' }))).errors).toEqual([]);
    const bad = await validatePod(pod({ [NETS]: 'x@net1, y@net1' }));
    expect(bad.errors[0]!.msg).toMatch(/net1/);
  });

  it("'complete': a NAD not given is ADD's \"cannot find\"; a given bad one is ADD's message for it", async () => {
    const missing = await validatePod(pod({ [NETS]: 'x' }), { complete: true });
    expect(missing.errors.map((e) => e.msg)).toEqual([
      'cannot find a network-attachment-definition (x) in namespace (ns1)',
    ]);
    const bad = await validatePod(pod({ [NETS]: 'x' }), { complete: true, nads: [nad('x', { cniVersion: '1.0.0' })] });
    expect(bad.errors[0]!.msg).toMatch(/^pod ns1\/p: error loading k8s delegates: NetworkAttachmentDefinition ns1\/x/);
  });

  it('namespace isolation follows the config given', async () => {
    const conf = parseMultusConf({ ...offlineConf().raw, namespaceIsolation: true });
    const other = [nad('x', { cniVersion: '1.0.0', type: 'bridge' }, 'ns2')];
    expect((await validatePod(pod({ [NETS]: 'ns2/x' }), { nads: other })).errors).toEqual([]);
    const v = await validatePod(pod({ [NETS]: 'ns2/x' }), { nads: other, conf });
    expect(v.errors[0]!.msg).toMatch(/namespace isolation/i);
  });
});

describe('preflight verdicts', () => {
  const run = async (annotations: Record<string, string>, nads: Nad[] = []) => {
    return preflightPod(pod(annotations), { nads, complete: true });
  };
  const good = [nad('a', { cniVersion: '1.0.0', type: 'macvlan' }), nad('b', { cniVersion: '1.0.0', type: 'ipvlan' })];

  it('fine pods get no verdict', async () => {
    expect(await run({ [NETS]: 'a,b' }, good)).toBeUndefined();
  });

  it('fails: a missing NAD, a bad NAD, a malformed annotation; when Go fails too', async () => {
    expect((await run({ [NETS]: 'a,zz' }, good))!.verdict).toBe('fails');
    expect((await run({ [NETS]: '[{"name":' }, good))!.verdict).toBe('fails');
    // Go fails on the missing NAD even though it would accept the routes: fails wins
    const both = '[{"name":"a","default-route":["10.0.0.1"]},{"name":"zz","default-route":["fd00::1"]}]';
    expect((await run({ [NETS]: both }, good))!.verdict).toBe('fails');
  });

  it('differs: IPv4 and IPv6 default routes on two elements, @ifname on the default network, an old cniVersion, a pool', async () => {
    const routes = '[{"name":"a","default-route":["10.0.0.1"]},{"name":"b","default-route":["fd00::1"]}]';
    const r = await run({ [NETS]: routes }, good);
    expect(r).toMatchObject({ verdict: 'differs', namespace: 'ns1', name: 'p' });
    expect(r!.reason).toMatch(/only one element may carry it.*; Go Multus merges/);
    const renamed = await run({ 'v1.multus-cni.io/default-network': 'ns1/a@eth7' }, good);
    expect(renamed).toMatchObject({ verdict: 'differs' });
    const version = await run({ [NETS]: 'v' }, [nad('v', { cniVersion: '9.9.9', type: 'macvlan' })]);
    expect(version).toMatchObject({ verdict: 'differs' });
    expect((await run({ [NETS]: '[{"name":"a","resourceName":"intel.com/sriov"}]' }, good))!.verdict).toBe('differs');
  });
});
