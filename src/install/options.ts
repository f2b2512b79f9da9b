/**
 * options.ts: `multus install` options, parsed from argv (pure).
 *
 * The names and defaults are those of Multus v4.3.0's thin entrypoint (pflag): `--name=value` or `--name value`
 * for strings, `--name` or `--name=true|false` for booleans. The multus-ts additions are documented in
 * docs/install.md: `--multus-cni-conf-dir-host`, `--service-account-dir`, `--install-binary-only`,
 * `--skip-multus-conf`. A bad option is an InstallError naming the option and what to write instead.
 * Tested by test/unit/install/install-conf.test.ts, test/unit/install/install.test.ts.
 */
import { parseCniVersion } from '../multus/generate-conf.ts';

export class InstallError extends Error {}
Object.defineProperty(InstallError.prototype, 'name', { value: 'InstallError', enumerable: false });

export interface InstallOptions {
  additionalBinDir: string;
  cleanupConfigOnExit: boolean;
  cniBinDir: string;
  cniConfDir: string;
  cniVersion: string;
  globalNamespaces: string;
  multusAutoconfigDir: string;
  multusBinFile: string;
  /** true when --multus-bin-file was given (else a missing default falls back to the running executable) */
  multusBinFileSet: boolean;
  multusCniConfDir: string;
  /** multus-ts: the host's path of --multus-cni-conf-dir, written as `confDir` */
  multusCniConfDirHost: string;
  multusConfFile: string;
  multusKubeconfigFileHost: string;
  multusLogFile: string;
  multusLogLevel: string;
  multusLogToStderr: boolean;
  multusMasterCniFileName: string;
  namespaceIsolation: boolean;
  overrideNetworkName: boolean;
  readinessIndicatorFile: string;
  renameConfFile: boolean;
  skipConfigWatch: boolean;
  /** Multus #1532: watch even without --cleanup-config-on-exit; ours always watches with `auto`, so it changes nothing */
  forceConfigWatch: boolean;
  skipMultusBinaryCopy: boolean;
  skipTlsVerify: boolean;
  forceCniVersion: boolean;
  /** multus-ts: where the service account token and ca.crt are mounted */
  serviceAccountDir: string;
  /** multus-ts: copy the executables, then exit (an init container's job) */
  installBinaryOnly: boolean;
  /** multus-ts: write (and keep current) the kubeconfig but no 00-multus conf (the resident daemon writes it) */
  skipMultusConf: boolean;
  /** multus-ts: the kubeconfig's token: `pod` (the mounted one, as Multus) or `node` (TokenRequest bound to the node) */
  tokenBinding: string;
  /** multus-ts: `<namespace>/<daemonset>`: on stop, remove the config and kubeconfig if that DaemonSet was deleted */
  cleanupWhenDeleted: string;
  /** multus-ts: with --cleanup-when-deleted, the DRA driver whose ResourceSlices on this node an uninstall removes */
  draDriverName: string;
  help: boolean;
}

type Key = keyof InstallOptions;

interface Flag {
  key: Key;
  bool: boolean;
  def: string | boolean;
  help: string;
  hidden?: boolean;
}

export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

/** Every flag, in Multus' order, with its default and help text. */
export const FLAGS: Record<string, Flag> = {
  'cni-bin-dir': { key: 'cniBinDir', bool: false, def: '/host/opt/cni/bin', help: 'CNI binary directory' },
  'cni-conf-dir': { key: 'cniConfDir', bool: false, def: '/host/etc/cni/net.d', help: 'CNI config directory' },
  'cni-version': { key: 'cniVersion', bool: false, def: '', help: "CNI version for multus CNI config (e.g. '0.3.1')" },
  'multus-conf-file': { key: 'multusConfFile', bool: false, def: 'auto', help: 'multus CNI config file' },
  'multus-bin-file': {
    key: 'multusBinFile',
    bool: false,
    def: '/usr/src/multus-cni/bin/multus',
    help: 'multus binary file path',
  },
  'multus-cni-conf-dir': {
    key: 'multusCniConfDir',
    bool: false,
    def: '/host/etc/cni/multus/net.d',
    help: 'multus specific CNI config directory',
  },
  'multus-cni-conf-dir-host': {
    key: 'multusCniConfDirHost',
    bool: false,
    def: '',
    help: "the host's path of --multus-cni-conf-dir, written as confDir (default: it without a leading /host)",
  },
  'skip-multus-binary-copy': {
    key: 'skipMultusBinaryCopy',
    bool: true,
    def: false,
    help: 'skip multus binary file copy',
  },
  'multus-kubeconfig-file-host': {
    key: 'multusKubeconfigFileHost',
    bool: false,
    def: '/etc/cni/net.d/multus.d/multus.kubeconfig',
    help: 'kubeconfig for multus (used only with --multus-conf-file=auto)',
  },
  'multus-master-cni-file-name': {
    key: 'multusMasterCniFileName',
    bool: false,
    def: '',
    help: 'master CNI file in multus-autoconfig-dir',
  },
  'namespace-isolation': { key: 'namespaceIsolation', bool: true, def: false, help: 'namespace isolation' },
  'global-namespaces': {
    key: 'globalNamespaces',
    bool: false,
    def: '',
    help: 'global namespaces, comma separated (used only with --namespace-isolation=true)',
  },
  'multus-autoconfig-dir': {
    key: 'multusAutoconfigDir',
    bool: false,
    def: '/host/etc/cni/net.d',
    help: 'multus autoconfig dir (used only with --multus-conf-file=auto)',
  },
  'multus-log-to-stderr': { key: 'multusLogToStderr', bool: true, def: true, help: 'log to stderr' },
  'multus-log-level': { key: 'multusLogLevel', bool: false, def: '', help: 'multus log level' },
  'multus-log-file': { key: 'multusLogFile', bool: false, def: '', help: 'multus log file' },
  'override-network-name': {
    key: 'overrideNetworkName',
    bool: true,
    def: false,
    help: 'override network name from master cni file (used only with --multus-conf-file=auto)',
  },
  'cleanup-config-on-exit': { key: 'cleanupConfigOnExit', bool: true, def: false, help: 'cleanup config file on exit' },
  'skip-config-watch': {
    key: 'skipConfigWatch',
    bool: true,
    def: false,
    help: 'dont watch for config (master cni and kubeconfig) changes (used only with --multus-conf-file=auto)',
  },
  'force-config-watch': {
    key: 'forceConfigWatch',
    bool: true,
    def: false,
    help: 'watch for config changes even without --cleanup-config-on-exit (always so here: accepted for Multus #1532)',
  },
  'rename-conf-file': {
    key: 'renameConfFile',
    bool: true,
    def: false,
    help: 'rename master config file to invalidate (used only with --multus-conf-file=auto)',
  },
  'readiness-indicator-file': {
    key: 'readinessIndicatorFile',
    bool: false,
    def: '',
    help: 'readiness indicator file (used only with --multus-conf-file=auto)',
  },
  'additional-bin-dir': {
    key: 'additionalBinDir',
    bool: false,
    def: '',
    help: 'adds binDir option to configuration (used only with --multus-conf-file=auto)',
  },
  'skip-tls-verify': { key: 'skipTlsVerify', bool: true, def: false, help: 'skip TLS verify', hidden: true },
  'force-cni-version': {
    key: 'forceCniVersion',
    bool: true,
    def: false,
    help: "force cni version to '--cni-version'",
    hidden: true,
  },
  'service-account-dir': {
    key: 'serviceAccountDir',
    bool: false,
    def: SERVICE_ACCOUNT_DIR,
    help: 'where the service account token and ca.crt are mounted',
  },
  'install-binary-only': {
    key: 'installBinaryOnly',
    bool: true,
    def: false,
    help: 'copy the executables into --cni-bin-dir and exit (for an init container)',
  },
  'skip-multus-conf': {
    key: 'skipMultusConf',
    bool: true,
    def: false,
    help: 'write and rotate the kubeconfig only, no 00-multus.conf (the resident daemon writes that)',
  },
  'token-binding': {
    key: 'tokenBinding',
    bool: false,
    def: 'pod',
    help:
      "the kubeconfig's token: pod (the mounted one, valid while this pod exists) or node (requested bound to " +
      'the node named by MULTUS_NODE_NAME, so it outlives the pod: needs create on serviceaccounts/token)',
  },
  'cleanup-when-deleted': {
    key: 'cleanupWhenDeleted',
    bool: false,
    def: '',
    help:
      'NAMESPACE/DAEMONSET: when stopped because that DaemonSet was deleted (helm uninstall), remove 00-multus.conf(list) ' +
      'and the kubeconfig, and keep them on any other stop (an upgrade): needs get on that daemonset',
  },
  'dra-driver-name': {
    key: 'draDriverName',
    bool: false,
    def: '',
    help:
      'with --cleanup-when-deleted: the DRA driver (draDriverName) whose ResourceSlices on this node (MULTUS_NODE_NAME) ' +
      'the uninstall removes: needs deletecollection on resourceslices',
  },
  help: { key: 'help', bool: true, def: false, help: 'show help message and quit' },
};

export function usage(): string {
  const lines = ['usage: multus install [options]'];
  for (const [name, f] of Object.entries(FLAGS)) {
    if (f.hidden) continue;
    const def = f.bool ? (f.def ? ' (default true)' : '') : f.def ? ` (default "${f.def}")` : '';
    lines.push(`      --${name}${f.bool ? '' : ' string'}`.padEnd(40) + ` ${f.help}${def}`);
  }
  return lines.join('\n') + '\n';
}

/** pflag's strconv.ParseBool. */
function parseBool(name: string, v: string): boolean {
  if (['1', 't', 'T', 'true', 'TRUE', 'True'].includes(v)) return true;
  if (['0', 'f', 'F', 'false', 'FALSE', 'False'].includes(v)) return false;
  throw new InstallError(`invalid value "${v}" for --${name}: write --${name}=true or --${name}=false`);
}

export function defaultOptions(): InstallOptions {
  const o = {} as Record<Key, unknown>;
  for (const f of Object.values(FLAGS)) o[f.key] = f.def;
  o.multusBinFileSet = false;
  return o as unknown as InstallOptions;
}

// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f]/;

export function parseInstallArgs(argv: readonly string[]): InstallOptions {
  const o = defaultOptions() as unknown as Record<Key, unknown>;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '-h') {
      o.help = true;
      continue;
    }
    const m = /^--([a-z-]+)(?:=(.*))?$/s.exec(arg);
    if (!m) {
      throw new InstallError(`unexpected argument "${arg}": options are --name=value (see multus install --help)`);
    }
    const name = m[1]!;
    const flag = FLAGS[name];
    if (!flag) throw new InstallError(`unknown option --${name} (see multus install --help for the list)`);
    let value: string | boolean;
    if (flag.bool) {
      value = m[2] === undefined ? true : parseBool(name, m[2]);
    } else if (m[2] !== undefined) {
      value = m[2];
    } else {
      const next = argv[++i];
      if (next === undefined) throw new InstallError(`option --${name} needs a value: write --${name}=VALUE`);
      value = next;
    }
    if (typeof value === 'string' && CONTROL.test(value)) {
      throw new InstallError(`option --${name} contains a control character: ${JSON.stringify(value)}`);
    }
    o[flag.key] = value;
    if (flag.key === 'multusBinFile') o.multusBinFileSet = true;
  }
  const opts = o as unknown as InstallOptions;
  checkOptions(opts);
  return opts;
}

const LOG_LEVELS = ['debug', 'error', 'panic', 'verbose'];

function checkOptions(o: InstallOptions): void {
  for (const [name, v] of [
    ['cni-bin-dir', o.cniBinDir],
    ['cni-conf-dir', o.cniConfDir],
    ['multus-autoconfig-dir', o.multusAutoconfigDir],
  ] as const) {
    if (v === '') throw new InstallError(`option --${name} is empty: give a directory`);
  }
  const level = o.multusLogLevel.toLowerCase();
  if (level !== '' && !LOG_LEVELS.includes(level)) {
    throw new InstallError(
      'Log levels should be one of: debug/verbose/error/panic, did not understand: ' +
        `"${o.multusLogLevel}" (--multus-log-level)`,
    );
  }
  const name = o.multusMasterCniFileName;
  if (name !== '' && (name.includes('/') || name === '.' || name === '..')) {
    throw new InstallError(
      `--multus-master-cni-file-name=${name}: give a file name in --multus-autoconfig-dir, not a path`,
    );
  }
  if (o.cniVersion !== '' && parseCniVersion(o.cniVersion) === null) {
    throw new InstallError(`--cni-version=${o.cniVersion} is not a CNI version: write e.g. 1.0.0 or 0.3.1`);
  }
  if (o.installBinaryOnly && o.skipMultusBinaryCopy) {
    throw new InstallError('--install-binary-only and --skip-multus-binary-copy together do nothing: drop one');
  }
  if (o.forceCniVersion && o.cniVersion === '') {
    throw new InstallError('--force-cni-version needs --cni-version=VERSION');
  }
  if (o.tokenBinding !== 'pod' && o.tokenBinding !== 'node') {
    throw new InstallError(`--token-binding=${o.tokenBinding}: write --token-binding=pod or --token-binding=node`);
  }
  if (o.cleanupWhenDeleted !== '' && !parseDaemonSetRef(o.cleanupWhenDeleted)) {
    throw new InstallError(
      `--cleanup-when-deleted=${o.cleanupWhenDeleted}: write the DaemonSet as NAMESPACE/NAME, e.g. kube-system/kube-multus-ds`,
    );
  }
  if (o.draDriverName !== '' && !/^[a-z0-9]([-a-z0-9.]{0,61}[a-z0-9])?$/.test(o.draDriverName)) {
    throw new InstallError(
      `--dra-driver-name=${o.draDriverName}: write the driver's name, e.g. multus.k8s.cni.cncf.io`,
    );
  }
  if (o.multusCniConfDirHost === '') o.multusCniConfDirHost = o.multusCniConfDir.replace(/^\/host(?=\/)/, '');
}

/** `<namespace>/<name>` of a DaemonSet (a DNS-1123 label, then a DNS-1123 subdomain), or undefined. */
export function parseDaemonSetRef(ref: string): { namespace: string; name: string } | undefined {
  const m = /^([a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?)\/([a-z0-9](?:[-a-z0-9.]{0,251}[a-z0-9])?)$/.exec(ref);
  return m ? { namespace: m[1]!, name: m[2]! } : undefined;
}
