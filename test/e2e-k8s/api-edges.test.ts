/**
 * Kubernetes mode end to end, the API's rough edges: a pod updated by someone else while ADD runs (409 on
 * the status write), a pod deleted before DEL, a rotated service-account token file, a kubeconfig's inline token
 * refused and then rewritten (an upgrade's gap), and the API server gone before DEL (last: it stops this file's
 * API server).
 *
 * A "gate" plugin (a shell wrapper around /usr/lib/cni/bridge in the test's bin dir, used as the cluster
 * network's type) holds an ADD after multus has read the pod and its NADs and before it writes the pod's
 * status, so the test can change the world at exactly that moment.
 */
import { readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AuditEvent, type Cluster, k8sRequirements, podPath, startCluster } from '../k8s/cluster.ts';
import { needs } from '../helpers/skip.ts';
import { CLUSTER_NET, describeRun, e2eRequirements, reservedIps } from '../e2e/helpers.ts';
import {
  NETWORKS_ANNOTATION,
  auditLine,
  boundMultusToken,
  createNad,
  credentialOf,
  multusAudit,
  networkStatus,
  readPod,
  revokeToken,
  sleep,
  v4,
  withWorld,
} from './world.ts';

const ready = needs(...e2eRequirements(), ...k8sRequirements());

describe.skipIf(!ready)('Kubernetes mode: conflicts, deleted pods, token rotation, API server gone', () => {
  let cluster: Cluster;
  let index = 100;
  const next = () => ++index;

  beforeAll(async () => {
    cluster = await startCluster();
    console.log(`startCluster took ${cluster.startupMs} ms ${JSON.stringify(cluster.startupPhases)}`);
  });
  afterAll(async () => {
    await cluster?.stop();
  });

  it('a concurrent update of the pod during ADD (409 on the status write): ADD re-reads, retries and succeeds', async () => {
    await withWorld(cluster, { index: next() }, async (kw) => {
      await kw.installGate('gate-bridge', 'bridge');
      await createNad(cluster, kw.ns, 'net-a', kw.macvlan('net-a', 1));
      const sb = await kw.pod('pod-conflict', { [NETWORKS_ANNOTATION]: 'net-a' });
      const conf = await kw.writeConf(kw.multusConfig(cluster.multusKubeconfig, {}, 'gate-bridge'));
      const rvBefore = (await readPod(cluster, sb.pod)).metadata.resourceVersion as string;

      await kw.hold(sb);
      const adding = kw.driver('add', conf, sb);
      try {
        await kw.waitEntered(sb);
        // multus has the pod (resourceVersion rvBefore) in hand; someone else changes it now
        await cluster.admin.patch(podPath(sb.pod.namespace, sb.pod.name), {
          metadata: { labels: { touched: 'by-admin' } },
        });
      } finally {
        await kw.release(sb);
      }
      const r = await adding;
      expect(r.code, `ADD: ${describeRun(r)}\n${await kw.logTail()}`).toBe(0);

      const pod = await readPod(cluster, sb.pod);
      expect(pod.metadata.resourceVersion).not.toBe(rvBefore);
      expect(pod.metadata.labels?.touched, 'the concurrent change survives').toBe('by-admin');
      const status = await networkStatus(cluster, sb.pod);
      expect(status?.map((e) => [e.name, e.interface])).toEqual([
        [CLUSTER_NET, 'eth0'],
        [`${kw.ns}/net-a`, 'net1'],
      ]);

      // the conflict really happened, and was resolved by a re-read and one more write
      const podCalls = await multusAudit(
        cluster,
        (e) => e.objectRef?.resource === 'pods' && e.objectRef?.name === sb.pod.name,
        4,
      );
      console.log(`pod requests of multus during the conflicting ADD:\n  ${podCalls.map(auditLine).join('\n  ')}`);
      const writes = podCalls.filter((e) => e.objectRef?.subresource === 'status').map((e) => e.responseStatus?.code);
      expect(writes, podCalls.map(auditLine).join('\n')).toEqual([409, 200]);
      expect(podCalls.filter((e) => e.verb === 'get').length).toBe(2);

      await kw.del(conf, sb);
      await kw.expectTornDown(sb);
    });
  });

  it('the pod deleted between ADD and DEL: DEL tears everything down from the caches, with no API request', async () => {
    await withWorld(cluster, { index: next() }, async (kw) => {
      await createNad(cluster, kw.ns, 'net-a', kw.macvlan('net-a', 1));
      await createNad(cluster, kw.otherNs, 'net-b', kw.bridge('net-b', 2, 'b'));
      const sb = await kw.pod('pod-gone', { [NETWORKS_ANNOTATION]: `net-a,${kw.otherNs}/net-b` });
      const conf = await kw.writeConf(kw.multusConfig(cluster.multusKubeconfig));
      await kw.add(conf, sb);
      expect([...(await kw.podLinks(sb)).keys()].sort()).toEqual(['eth0', 'lo', 'net1', 'net2']);

      await cluster.admin.del(podPath(sb.pod.namespace, sb.pod.name));
      for (
        let i = 0;
        (await cluster.admin.request('GET', podPath(sb.pod.namespace, sb.pod.name))).status !== 404;
        i++
      ) {
        if (i > 100) throw new Error('the pod is still there 10 s after its deletion');
        await sleep(100);
      }
      const mine = (e: AuditEvent) => e.objectRef?.namespace === kw.ns || e.objectRef?.namespace === kw.otherNs;
      const before = await multusAudit(cluster, mine, 0);

      await kw.del(conf, sb);
      await kw.expectTornDown(sb);
      const during = (await multusAudit(cluster, mine, 0)).slice(before.length);
      expect(during.map(auditLine), 'requests of DEL').toEqual([]);
    });
  });

  it('a rotated token file is read again: across calls, and within one ADD (old tokens revoked, so a stale one fails)', async () => {
    await withWorld(cluster, { index: next() }, async (kw) => {
      // Tokens bound to Secrets: deleting the Secret makes the API server reject the token (401), so a plugin
      // that kept an old token, across processes or within one, fails. tokenFile is the harness' file that
      // cluster.multusTokenFileKubeconfig points at.
      await kw.installGate('gate-bridge', 'bridge');
      await createNad(cluster, kw.ns, 'net-a', kw.macvlan('net-a', 1));
      const a = await kw.pod('pod-a', { [NETWORKS_ANNOTATION]: 'net-a' });
      const b = await kw.pod('pod-b', { [NETWORKS_ANNOTATION]: 'net-a' });
      const conf = await kw.writeConf(kw.multusConfig(cluster.multusTokenFileKubeconfig, {}, 'gate-bridge'));

      const ta = await boundMultusToken(cluster, `rot-a-${kw.id}`);
      await writeFile(cluster.tokenFile, ta.token);
      await kw.add(conf, a);

      // rotation between calls: the file gets token B, token A is revoked
      const tb = await boundMultusToken(cluster, `rot-b-${kw.id}`);
      await writeFile(cluster.tokenFile, tb.token);
      const revokedA = await revokeToken(cluster, ta);

      // rotation within a call: B's ADD reads the pod and NAD with token B, is held before the status
      // write, the file gets token C and token B is revoked; the status write must use token C
      await kw.hold(b);
      const adding = kw.driver('add', conf, b);
      let revokedB = 0;
      try {
        await kw.waitEntered(b);
        const tc = await boundMultusToken(cluster, `rot-c-${kw.id}`);
        await writeFile(cluster.tokenFile, tc.token);
        revokedB = await revokeToken(cluster, tb);
        await kw.release(b);
        const r = await adding;
        expect(r.code, `ADD of pod-b across the rotation: ${describeRun(r)}\n${await kw.logTail()}`).toBe(0);
        await kw.notePeers(b);
        console.log(`token A revoked (401) after ${revokedA} ms, token B after ${revokedB} ms`);

        expect((await networkStatus(cluster, b.pod))?.length).toBe(2);
        const calls = await multusAudit(
          cluster,
          (e) => e.objectRef?.namespace === kw.ns && e.objectRef?.resource !== 'events',
          7,
        );
        const byToken = calls.map((e) => {
          const cred = credentialOf(e);
          const token =
            cred === `JTI=${ta.jti}`
              ? 'A'
              : cred === `JTI=${tb.jti}`
                ? 'B'
                : cred === `JTI=${tc.jti}`
                  ? 'C'
                  : `? ${cred}`;
          return `${auditLine(e)} [token ${token}]`;
        });
        console.log(`multus requests with the rotating token file:\n  ${byToken.join('\n  ')}`);
        expect(byToken.sort()).toEqual(
          [
            `get pods ${kw.ns}/pod-a -> 200 [token A]`,
            `get network-attachment-definitions ${kw.ns}/net-a -> 200 [token A]`,
            `update pods/status ${kw.ns}/pod-a -> 200 [token A]`,
            `get pods ${kw.ns}/pod-b -> 200 [token B]`,
            `get network-attachment-definitions ${kw.ns}/net-a -> 200 [token B]`,
            `update pods/status ${kw.ns}/pod-b -> 200 [token C]`,
          ].sort(),
        );
      } finally {
        await kw.release(b);
        await adding.catch(() => undefined);
      }

      await kw.del(conf, a);
      await kw.expectTornDown(a, { last: false });
      expect(await reservedIps(kw.w.ipamDir), "pod-b's addresses only").toHaveLength(2);
      await kw.del(conf, b);
      await kw.expectTornDown(b);
    });
  });

  it("an inline token refused (an upgrade's old DaemonSet pod gone): ADD waits for the kubeconfig rewritten with a new one, and succeeds", async () => {
    await withWorld(cluster, { index: next() }, async (kw) => {
      // Multus' kubeconfig holds the DaemonSet pod's token inline; in an upgrade the pod goes, its token is refused,
      // and the new pod rewrites the file (by rename) a moment later (docs/install.md, "Upgrade"). Go Multus fails
      // such an ADD at once; ours reads the file again within the readiness wait and asks once more.
      await createNad(cluster, kw.ns, 'net-a', kw.macvlan('net-a', 1));
      const sb = await kw.pod('pod-rewritten', { [NETWORKS_ANNOTATION]: 'net-a' });
      const template = await readFile(cluster.multusKubeconfig, 'utf8');
      const withToken = (t: string) => template.replace(/token: "[^"]*"/, `token: "${t}"`);
      const kubeconfig = join(kw.w.dir, 'multus.kubeconfig');
      const old = await boundMultusToken(cluster, `old-pod-${kw.id}`);
      await writeFile(kubeconfig, withToken(old.token), { mode: 0o600 });
      await revokeToken(cluster, old);
      const conf = await kw.writeConf(kw.multusConfig(kubeconfig, {}));

      const adding = kw.driver('add', conf, sb);
      const fresh = await boundMultusToken(cluster, `new-pod-${kw.id}`);
      // the new pod's entrypoint: seconds later, by rename
      await sleep(1500);
      await writeFile(`${kubeconfig}.tmp`, withToken(fresh.token), { mode: 0o600 });
      await rename(`${kubeconfig}.tmp`, kubeconfig);
      const r = await adding;
      expect(r.code, `ADD across the rewrite: ${describeRun(r)}\n${await kw.logTail()}`).toBe(0);
      await kw.notePeers(sb);
      // every GET of the pod, the refused one too (it names no user, so not the multus user's)
      const isGet = (e: AuditEvent) =>
        e.objectRef?.namespace === kw.ns && e.objectRef?.resource === 'pods' && e.verb === 'get';
      let gets: AuditEvent[] = [];
      for (let i = 0; i < 50 && gets.length < 2; i++, await sleep(100))
        gets = (await cluster.auditEvents()).filter(isGet);
      const tokenOf = (e: AuditEvent) => (credentialOf(e) === `JTI=${fresh.jti}` ? 'new' : `? ${credentialOf(e)}`);
      expect(gets.map((e) => `${auditLine(e)}${e.responseStatus?.code === 401 ? '' : ` [${tokenOf(e)}]`}`)).toEqual([
        `get pods ${kw.ns}/pod-rewritten -> 401`,
        `get pods ${kw.ns}/pod-rewritten -> 200 [new]`,
      ]);
      expect((await networkStatus(cluster, sb.pod))?.length).toBe(2);
      await kw.del(conf, sb);
      await kw.expectTornDown(sb);
    });
  });

  // Last: it stops this file's API server.
  it('the API server stopped before DEL: DEL succeeds within seconds and removes every attachment (with and without the scratch cache)', async () => {
    await withWorld(cluster, { index: next() }, async (kw) => {
      await createNad(cluster, kw.ns, 'net-a', kw.macvlan('net-a', 1));
      await createNad(cluster, kw.otherNs, 'net-b', kw.bridge('net-b', 2, 'b'));
      const annotation = { [NETWORKS_ANNOTATION]: `net-a,${kw.otherNs}/net-b@data1` };
      const a = await kw.pod('pod-a', annotation);
      const b = await kw.pod('pod-b', annotation);
      const conf = await kw.writeConf(kw.multusConfig(cluster.multusKubeconfig));
      await kw.add(conf, a);
      await kw.add(conf, b);
      for (const sb of [a, b]) {
        const links = await kw.podLinks(sb);
        expect([...links.keys()].sort()).toEqual(['data1', 'eth0', 'lo', 'net1']);
        expect(v4(links.get('net1'))).toHaveLength(1);
      }
      expect(await reservedIps(kw.w.ipamDir)).toHaveLength(6);
      // pod-b's DEL has only the libcni result caches to go by (and would want the pod from the API)
      await rm(join(kw.w.cniDir, b.containerId));

      await cluster.stopApiserver();
      const refused = await cluster.admin.request('GET', '/readyz', undefined, undefined, 2_000).then(
        (res) => `HTTP ${res.status}`,
        (e: Error) => e.message,
      );
      expect(refused).toMatch(/ECONNREFUSED|connect/);

      let t0 = performance.now();
      await kw.del(conf, a);
      const msA = Math.round(performance.now() - t0);
      await kw.expectTornDown(a, { last: false });
      expect(await reservedIps(kw.w.ipamDir), "pod-b's addresses only").toHaveLength(3);

      t0 = performance.now();
      await kw.del(conf, b);
      const msB = Math.round(performance.now() - t0);
      await kw.expectTornDown(b);
      console.log(`DEL with the API server down: ${msA} ms (scratch cache), ${msB} ms (result caches only)`);
      // pod-b's DEL did try the API (no scratch cache) and went on without it
      expect(await readFile(kw.w.logFile, 'utf8')).toContain(
        `cannot read pod ${kw.ns}/pod-b, deleting from the caches`,
      );
      expect(msA).toBeLessThan(5_000);
      expect(msB).toBeLessThan(5_000);
    });
  });
});
