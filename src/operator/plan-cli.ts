/**
 * operator/plan-cli.ts: `multus plan --pod NS/NAME [--kubeconfig F] [--conf 00-multus.conf] [--output json]`
 * prints what an ADD of that pod would do, touching nothing (multus/explain.ts, docs/hotplug.md). It reads the
 * pod and its NADs with the multus config's kubeconfig (or --kubeconfig) and writes nothing to the API.
 * Exit codes: 0 the ADD would go ahead, 1 it would fail (the errors are printed), 2 bad usage or no API.
 * Tested by test/e2e-k8s/hotplug.test.ts (`multus plan` against a real API).
 */
import { readFileSync } from 'node:fs';
import { callerEnv } from '../base/caller-env.ts';
import { messageOf } from '../base/errors.ts';
import { createLogger } from '../base/log.ts';
import { loadKubeClient } from '../k8s/client.ts';
import { explainAdd, formatExplanation } from '../multus/explain.ts';
import { serveClaimNetworks } from '../dra/claim-delegates.ts';
import { parseMultusConf } from '../multus/conf.ts';
import type { CliIo } from './hotplug-cli.ts';

const USAGE =
  'usage: multus plan --pod NS/NAME [--kubeconfig FILE] [--conf /etc/cni/net.d/00-multus.conf] [--output json]';

interface PlanArgs {
  namespace: string;
  name: string;
  kubeconfig: string;
  conf: string;
  json: boolean;
}

export function parsePlanArgs(argv: string[]): PlanArgs {
  const out: PlanArgs = { namespace: '', name: '', kubeconfig: '', conf: '/etc/cni/net.d/00-multus.conf', json: false };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i]!;
    const value = argv[++i];
    if (value === undefined) throw new Error(`${flag} needs a value: ${USAGE}`);
    if (flag === '--pod') {
      const [ns, name, extra] = value.split('/');
      if (!ns || !name || extra !== undefined) throw new Error(`--pod must be NAMESPACE/NAME, got "${value}"`);
      out.namespace = ns;
      out.name = name;
    } else if (flag === '--kubeconfig') out.kubeconfig = value;
    else if (flag === '--conf') out.conf = value;
    else if (flag === '--output' || flag === '-o') {
      if (value !== 'json' && value !== 'text') throw new Error(`--output is json or text, got "${value}"`);
      out.json = value === 'json';
    } else throw new Error(`unknown flag "${flag}": ${USAGE}`);
  }
  if (!out.namespace) throw new Error(`--pod is required: ${USAGE}`);
  return out;
}

const processIo: CliIo = { stdout: (s) => process.stdout.write(s), stderr: (s) => process.stderr.write(s) };

export async function runPlanCli(
  argv: string[],
  io: CliIo = processIo,
  env: Record<string, string | undefined> = callerEnv(process.env),
): Promise<number> {
  let kube;
  let a: PlanArgs;
  try {
    a = parsePlanArgs(argv);
    const conf = parseMultusConf(readFileSync(a.conf));
    const log = createLogger({ level: 'error', logToStderr: true }, { writeStderr: io.stderr });
    kube = await loadKubeClient({ kubeconfig: a.kubeconfig || conf.kubeconfig, env, log });
    if (!kube) throw new Error(`${a.conf} names no kubeconfig and this is not a pod: pass --kubeconfig FILE`);
    // what the resident daemon would attach from the pod's claims of our driver (docs/behaviour.md#claim-networks)
    const x = await explainAdd(conf, a.namespace, a.name, kube, log, { claimNetworks: serveClaimNetworks });
    io.stdout(a.json ? `${JSON.stringify(x, null, 2)}\n` : formatExplanation(x));
    return x.errors.length === 0 ? 0 : 1;
  } catch (e) {
    io.stderr(`multus plan: ${messageOf(e)}\n`);
    return 2;
  } finally {
    kube?.close();
  }
}
