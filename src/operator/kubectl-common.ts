/**
 * operator/kubectl-common.ts: what `kubectl multus`'s commands share (docs/kubectl-multus.md): kubectl's flags
 * (`--kubeconfig`, `--context`, `-n`/`--namespace`, `-o`/`--output`, `-f`/`--filename`, `--node`, `--conf`),
 * kubectl's kubeconfig rules (`--kubeconfig`, else the first file of `KUBECONFIG` that exists, else
 * `~/.kube/config`, else the in-cluster config; kubectl merges every `KUBECONFIG` file, this reads the first),
 * the namespace (`-n`, else the context's, else `default`), and reading objects from files (YAML or JSON, several
 * documents, `List`s). Errors here are usage or API errors: exit 2.
 * Tested by test/cli/kubectl-multus.test.ts, test/e2e-k8s/kubectl-multus.test.ts.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { messageOf } from '../base/errors.ts';
import { isObject } from '../base/json.ts';
import { silentLogger } from '../base/log.ts';
import { loadKubeClient } from '../k8s/client.ts';
import { parseKubeconfigText } from '../k8s/yaml.ts';
import { loadFallbackModule } from '../k8s/fallback-loader.ts';
import type { KubeClient, Nad, Pod, WatchClient } from '../k8s/types.ts';
import type { MultusConf } from '../multus/conf.ts';
import { parseMultusConf } from '../multus/conf.ts';
import { offlineConf } from '../multus/validate.ts';
import type { CliIo } from './hotplug-cli.ts';

export type { CliIo };
export type Env = Record<string, string | undefined>;

export class UsageError extends Error {}

export interface KubectlDeps {
  io: CliIo;
  env: Env;
  stdin: () => string;
}

export interface KubectlFlags {
  kubeconfig: string;
  context: string;
  namespace: string;
  output: 'text' | 'json';
  files: string[];
  node: string;
  conf: string;
  /** What is left: the command's own arguments. */
  args: string[];
}

const VALUED = new Map<string, keyof KubectlFlags>([
  ['--kubeconfig', 'kubeconfig'],
  ['--context', 'context'],
  ['-n', 'namespace'],
  ['--namespace', 'namespace'],
  ['-o', 'output'],
  ['--output', 'output'],
  ['-f', 'files'],
  ['--filename', 'files'],
  ['--node', 'node'],
  ['--conf', 'conf'],
]);

/** kubectl's flags, as `--flag value` or `--flag=value`; `allowed` names the flags this command takes. */
export function parseKubectlFlags(argv: readonly string[], allowed: readonly string[]): KubectlFlags {
  const out: KubectlFlags = {
    kubeconfig: '',
    context: '',
    namespace: '',
    output: 'text',
    files: [],
    node: '',
    conf: '',
    args: [],
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (!arg.startsWith('-') || arg === '-') {
      out.args.push(arg);
      continue;
    }
    const eq = arg.indexOf('=');
    const flag = eq > 0 ? arg.slice(0, eq) : arg;
    const key = VALUED.get(flag);
    if (!key || !allowed.includes(key)) throw new UsageError(`unknown flag "${flag}"`);
    const value = eq > 0 ? arg.slice(eq + 1) : argv[++i];
    if (value === undefined || value === '') throw new UsageError(`${flag} needs a value`);
    if (key === 'files') out.files.push(value);
    else if (key === 'output') {
      if (value !== 'json' && value !== 'text') throw new UsageError(`${flag} is json or text, got "${value}"`);
      out.output = value;
    } else out[key as 'kubeconfig' | 'context' | 'namespace' | 'node' | 'conf'] = value;
  }
  return out;
}

/** kubectl's choice of kubeconfig file ('' for the in-cluster config). */
export function kubeconfigPath(flags: Pick<KubectlFlags, 'kubeconfig'>, env: Env): string {
  if (flags.kubeconfig) return flags.kubeconfig;
  for (const file of (env.KUBECONFIG ?? '').split(':')) if (file && existsSync(file)) return file;
  const home = env.HOME ? join(env.HOME, '.kube', 'config') : '';
  return home && existsSync(home) ? home : '';
}

export interface Cluster {
  kube: KubeClient & WatchClient;
  /** `-n`, else the context's namespace, else `default`. */
  namespace: string;
}

/** A client by kubectl's rules; throws a UsageError when there is no cluster to talk to. */
export async function connect(flags: KubectlFlags, env: Env): Promise<Cluster> {
  const kubeconfig = kubeconfigPath(flags, env);
  const kube = await loadKubeClient({
    kubeconfig,
    ...(flags.context ? { context: flags.context } : {}),
    env,
    log: silentLogger,
  });
  if (!kube) throw new UsageError('no kubeconfig: pass --kubeconfig FILE or set KUBECONFIG');
  return { kube, namespace: flags.namespace || kube.info.namespace || 'default' };
}

/** One page of everything at `path` (a LIST), its `items`. */
export async function listItems<T>(kube: WatchClient, resource: string, path: string): Promise<T[]> {
  const list = await kube.listPage<{ items?: unknown }>(resource, path);
  return Array.isArray(list?.items) ? (list.items as T[]) : [];
}

const NODE_CONF = '/etc/cni/net.d/00-multus.conf';

/**
 * `--conf`, else the node's 00-multus.conf, else Multus' defaults (validate.ts `offlineConf`); a node's file that
 * is not a thin config (the thick layout's shim config names no networks) gives the defaults too.
 */
export function loadConf(file: string): MultusConf {
  if (!file && !existsSync(NODE_CONF)) return offlineConf();
  try {
    return parseMultusConf(readFileSync(file || NODE_CONF));
  } catch (e) {
    if (!file) return offlineConf();
    throw new UsageError(`${file}: ${messageOf(e)}`);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Objects from files

export interface FileObject {
  kind: string;
  /** Pod-like: a pod or a workload's pod template (its metadata named after the workload). */
  pod?: Pod;
  nad?: Nad;
  /** `<Kind> <namespace>/<name>`, for the report. */
  label: string;
}

/** The documents of a file's text: JSON (one object) or YAML (a stream). */
async function documents(text: string): Promise<unknown[]> {
  if (/^\s*[{[]/.test(text)) {
    try {
      return [JSON.parse(text) as unknown];
    } catch {
      // YAML in flow style: js-yaml reads it
    }
  }
  try {
    return [parseKubeconfigText(text)];
  } catch {
    return (await loadFallbackModule()).parseYamlDocuments(text);
  }
}

/** A workload's pod template (Deployment, DaemonSet, StatefulSet, ReplicaSet, Job, CronJob). */
function podTemplate(o: Record<string, unknown>): Record<string, unknown> | undefined {
  const spec = isObject(o.spec) ? o.spec : {};
  const job = isObject(spec.jobTemplate) && isObject(spec.jobTemplate.spec) ? spec.jobTemplate.spec : spec;
  return isObject(job.template) ? job.template : undefined;
}

function toObjects(doc: unknown, namespace: string, out: FileObject[]): void {
  if (!isObject(doc)) return;
  if (Array.isArray(doc.items)) {
    for (const item of doc.items) toObjects(item, namespace, out);
    return;
  }
  const kind = typeof doc.kind === 'string' ? doc.kind : '';
  const meta = isObject(doc.metadata) ? doc.metadata : {};
  const name = typeof meta.name === 'string' ? meta.name : '';
  const ns = typeof meta.namespace === 'string' && meta.namespace ? meta.namespace : namespace;
  const label = `${kind || 'object'} ${ns}/${name}`;
  if (kind === 'NetworkAttachmentDefinition') {
    out.push({ kind, label, nad: { ...(doc as unknown as Nad), metadata: { ...meta, name, namespace: ns } } });
    return;
  }
  const template = kind === 'Pod' ? doc : podTemplate(doc);
  if (!template) return;
  const tmeta = isObject(template.metadata) ? template.metadata : {};
  const metadata = { ...tmeta, name, namespace: ns, uid: '' } as Pod['metadata'];
  out.push({ kind, label, pod: { ...template, metadata } as Pod });
}

/** The NADs and pod-like objects of the files (`-` is stdin); other kinds are left out. */
export async function readObjects(
  files: readonly string[],
  namespace: string,
  stdin: () => string,
): Promise<FileObject[]> {
  const out: FileObject[] = [];
  for (const file of files) {
    let text: string;
    try {
      text = file === '-' ? stdin() : readFileSync(file, 'utf8');
    } catch (e) {
      throw new UsageError(`cannot read ${file}: ${(e as Error).message}`);
    }
    let docs: unknown[];
    try {
      docs = await documents(text);
    } catch (e) {
      throw new UsageError(`${file}: ${(e as Error).message}`);
    }
    for (const doc of docs) toObjects(doc, namespace, out);
  }
  return out;
}
