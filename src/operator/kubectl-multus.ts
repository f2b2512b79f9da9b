/**
 * operator/kubectl-multus.ts: the executable run as `kubectl-multus`, a kubectl plugin (docs/kubectl-multus.md):
 * - `validate -f FILE|-`: NADs and pods (or workloads' pod templates) from files, offline, each checked by the
 *   one validator ADD's messages come from (multus/validate.ts); a pod's NADs are those of the same files, others
 *   are not checked. Exit 1 when any object is bad (its message printed), 0 when all are good.
 * - `plan POD` / `plan -f pod.yaml`: what an ADD of the pod would do (multus/explain.ts, as `multus plan`).
 * - `status POD` (status-cli.ts) and `preflight` (preflight.ts).
 * Exit 2 for usage and API errors. The multus config is `--conf FILE`; offline (`-f`) Multus' defaults with a
 * stand-in cluster network, against a cluster the node's /etc/cni/net.d/00-multus.conf when there is one.
 * Tested by test/cli/kubectl-multus.test.ts, test/e2e-k8s/kubectl-multus.test.ts.
 */
import { readFileSync } from 'node:fs';
import { messageOf } from '../base/errors.ts';
import { callerEnv } from '../base/caller-env.ts';
import { formatExplanation } from '../multus/explain.ts';
import type { Verdict } from '../multus/validate.ts';
import { explainPod, offlineConf, validateNad, validatePod } from '../multus/validate.ts';
import type { CliIo, KubectlDeps, KubectlFlags } from './kubectl-common.ts';
import { UsageError, connect, loadConf, parseKubectlFlags, readObjects } from './kubectl-common.ts';
import { runPreflight } from './preflight.ts';
import { runStatus } from './status-cli.ts';

export const USAGE = `usage: kubectl multus COMMAND [flags]
  validate -f FILE|- [-f ...] [-n NS] [--conf FILE] [-o json]   check NADs and pods offline, as ADD would
  plan POD | plan -f pod.yaml [-n NS] [--conf FILE] [-o json]    what an ADD of the pod would do
  status POD [-n NS] [-o json]                                   the pod's network-status
  preflight [-n NS] [--node NAME] [--conf FILE] [-o json]        pods a swap from Go Multus would break
kubectl's flags: --kubeconfig FILE, --context NAME, -n/--namespace NS`;

const processDeps = (): KubectlDeps => ({
  io: { stdout: (s) => process.stdout.write(s), stderr: (s) => process.stderr.write(s) },
  env: callerEnv(process.env),
  stdin: () => readFileSync(0, 'utf8'),
});

export async function runKubectlMultus(argv: readonly string[], deps: KubectlDeps = processDeps()): Promise<number> {
  const [command, ...rest] = argv;
  try {
    switch (command) {
      case 'validate':
        return await validate(parseKubectlFlags(rest, ['files', 'namespace', 'conf', 'output']), deps);
      case 'plan':
        return await plan(
          parseKubectlFlags(rest, ['files', 'namespace', 'conf', 'output', 'kubeconfig', 'context']),
          deps,
        );
      case 'status':
        return await runStatus(parseKubectlFlags(rest, ['namespace', 'output', 'kubeconfig', 'context']), deps);
      case 'preflight': {
        const allowed = ['namespace', 'output', 'kubeconfig', 'context', 'node', 'conf'] as const;
        return await runPreflight(parseKubectlFlags(rest, allowed), deps);
      }
      case undefined:
      case '-h':
      case '--help':
      case 'help':
        deps.io.stdout(`${USAGE}\n`);
        return command === undefined ? 2 : 0;
      default:
        throw new UsageError(`unknown command "${command}"`);
    }
  } catch (e) {
    deps.io.stderr(`kubectl multus ${command ?? ''}: ${messageOf(e)}${e instanceof UsageError ? `\n${USAGE}` : ''}\n`);
    return 2;
  }
}

interface Report {
  object: string;
  errors: Verdict['errors'];
  warnings: string[];
}

/** ADD's message names the object itself (`pod ns/name: ...`, `NetworkAttachmentDefinition ns/name: ...`). */
const named = (object: string, msg: string): string =>
  msg.toLowerCase().startsWith(`${object.toLowerCase()}:`) ? msg : `${object}: ${msg}`;

function printReports(reports: Report[], flags: KubectlFlags, io: CliIo): number {
  const bad = reports.filter((r) => r.errors.length > 0).length;
  if (flags.output === 'json') io.stdout(`${JSON.stringify({ objects: reports }, null, 2)}\n`);
  else {
    for (const r of reports) {
      if (r.errors.length === 0) io.stdout(`ok     ${r.object}\n`);
      for (const e of r.errors) io.stdout(`error  ${named(r.object, e.msg)}${e.details ? ` (${e.details})` : ''}\n`);
      for (const w of r.warnings) io.stdout(`warn   ${r.object}: ${w}\n`);
    }
    io.stdout(`${reports.length} objects, ${bad} bad\n`);
  }
  return bad > 0 ? 1 : 0;
}

async function validate(flags: KubectlFlags, deps: KubectlDeps): Promise<number> {
  if (flags.files.length === 0) throw new UsageError('validate needs -f FILE (or -f - for stdin)');
  if (flags.args.length > 0) throw new UsageError(`unexpected argument "${flags.args[0]}"`);
  const conf = flags.conf ? loadConf(flags.conf) : offlineConf();
  const objects = await readObjects(flags.files, flags.namespace || 'default', deps.stdin);
  const nads = objects.flatMap((o) => (o.nad ? [o.nad] : []));
  const reports: Report[] = [];
  for (const o of objects) {
    const v = o.nad ? validateNad(o.nad, conf.confDir) : await validatePod(o.pod!, { nads, conf });
    reports.push({ object: o.label, errors: v.errors, warnings: o.nad ? v.warnings : [] });
  }
  if (objects.length === 0) throw new UsageError('no NetworkAttachmentDefinition or pod in the input');
  return printReports(reports, flags, deps.io);
}

async function plan(flags: KubectlFlags, deps: KubectlDeps): Promise<number> {
  if (flags.files.length > 0) {
    const conf = flags.conf ? loadConf(flags.conf) : offlineConf();
    const objects = await readObjects(flags.files, flags.namespace || 'default', deps.stdin);
    const nads = objects.flatMap((o) => (o.nad ? [o.nad] : []));
    const pods = objects.flatMap((o) => (o.pod ? [o.pod] : []));
    if (pods.length !== 1) throw new UsageError(`plan -f needs exactly one pod in its files, found ${pods.length}`);
    return printPlan(await explainPod(pods[0]!, { nads, conf }), flags, deps.io);
  }
  if (flags.args.length !== 1) throw new UsageError('plan needs a pod name (or -f pod.yaml)');
  const conf = loadConf(flags.conf);
  const { kube, namespace } = await connect(flags, deps.env);
  try {
    const pod = await kube.getPod(namespace, flags.args[0]!);
    const x = await explainPod(pod, { conf, getNad: (ns, name) => kube.getNad(ns, name) });
    return printPlan(x, flags, deps.io);
  } finally {
    kube.close();
  }
}

function printPlan(x: Awaited<ReturnType<typeof explainPod>>, flags: KubectlFlags, io: CliIo): number {
  io.stdout(flags.output === 'json' ? `${JSON.stringify(x, null, 2)}\n` : formatExplanation(x));
  return x.errors.length === 0 ? 0 : 1;
}
