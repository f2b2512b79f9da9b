/**
 * install.ts: `multus install`, the DaemonSet entrypoint (docs/install.md).
 *
 * Steps, as Multus' thin entrypoint but for the order of the first two: check the dirs; write the service account
 * kubeconfig to <conf dir>/multus.d/multus.kubeconfig; copy the executable (and `passthru`, `multus-shim` beside
 * it) into the CNI bin dir;
 * copy the given 00-multus conf, or (`auto`) wait for the master CNI config and generate 00-multus.conf(list)
 * from it (multus/generate-conf.ts). Then keep running: every second (unless --skip-config-watch) rewrite the kubeconfig
 * when the token or CA changed and regenerate when the master changed, was replaced by another or our file
 * went missing (renamed away by another CNI, Cilium's `.cilium_bak`: a warning in the log and a Warning event on
 * the node, renamed-conf.ts; another writer's file, a warning too: conf-writer.ts); on stop (SIGTERM), remove the generated file when --cleanup-config-on-exit. With
 * --token-binding=node the kubeconfig's token is one bound to the node (node-token.ts), renewed at 80% of its life.
 * The clock, the stop signal, the environment and the log are `InstallDeps`, so tests drive it step by step.
 */
import { dirname, join } from 'node:path';
import {
  basename,
  copyExecutableAtomic,
  linkExecutableAtomic,
  sameFile,
  errText,
  exists,
  isDir,
  mkdirPrivate,
  readIfExists,
  removeIfExists,
  sha256,
  writeAtomic,
} from './files.ts';
import { apiServerUrl, renderKubeconfig } from './kubeconfig.ts';
import {
  NODE_TOKEN_SECONDS,
  type NodeToken,
  type PodCredentials,
  type NodeTokenRequest,
  accountOf,
  requestNodeToken,
} from './node-token.ts';
import { GENERATED_FILES } from '../multus/generate-conf.ts';
import { type ConfState, copyGivenConf, newConfState, refreshMultusConf } from './conf-writer.ts';
import { InstallError, type InstallOptions, parseDaemonSetRef } from './options.ts';
import { type DeletionState, deleteDraSlices, deletionState } from './uninstall.ts';
import { payloadsBeside, prunePayloads } from './payloads.ts';
import type { Env } from '../cni/request.ts';

export interface InstallDeps {
  env: Readonly<Env>;
  /** the running executable (the source of the copy when --multus-bin-file is the missing default) */
  execPath: string;
  log(line: string): void;
  /** sleeps `ms`; resolves early (true) when the installer is asked to stop */
  sleep(ms: number): Promise<boolean>;
  stopped(): boolean;
  /** the clock (ms since the epoch; default Date.now): when a node-bound token is renewed */
  now?(): number;
  /** the TokenRequest of --token-binding=node (default: node-token.ts's requestNodeToken) */
  requestNodeToken?(r: NodeTokenRequest): Promise<NodeToken>;
  /** --cleanup-when-deleted's question (default: uninstall.ts's deletionState, one GET) */
  deletionState?(r: PodCredentials & { namespace: string; name: string }): Promise<DeletionState>;
  /** --dra-driver-name's delete on uninstall (default: uninstall.ts's deleteDraSlices) */
  deleteDraSlices?(r: PodCredentials & { nodeName: string; driver: string }): Promise<string>;
  /** posts a Warning event on this node with the kubeconfig just written (best effort: never throws) */
  warnNode?(w: { kubeconfig: string; reason: string; message: string }): Promise<void>;
}

export const TICK_MS = 1000;

interface State {
  caHash: string | null;
  tokenHash: string | null;
  /** 00-multus.conf(list): the master it was made from, what we wrote, when another writer was reported */
  conf: ConfState;
  lastError: string | null;
  /** --cleanup-when-deleted: the DaemonSet was readable when the installer started */
  deletionAnswered: boolean;
  /** --token-binding=node: the current token, when to renew it, when to retry a failed request */
  node: { token: NodeToken | null; renewAt: number; retryAt: number; lastError: string | null };
}

/** A failed TokenRequest is retried after this long (the pod's token serves meanwhile). */
const NODE_TOKEN_RETRY_MS = 10_000;

async function verify(o: InstallOptions, deps: InstallDeps): Promise<string | null> {
  if (!o.installBinaryOnly && !(await isDir(o.cniConfDir))) {
    throw new InstallError(
      `cni-conf-dir ${o.cniConfDir} is not found: mount the host's /etc/cni/net.d there or set --cni-conf-dir`,
    );
  }
  if (!(await isDir(o.cniBinDir))) {
    throw new InstallError(
      `cni-bin-dir ${o.cniBinDir} is not found: mount the host's /opt/cni/bin there or set --cni-bin-dir`,
    );
  }
  if (!o.installBinaryOnly && o.tokenBinding === 'node' && !deps.env.MULTUS_NODE_NAME) {
    throw new InstallError(
      '--token-binding=node needs MULTUS_NODE_NAME, the node to bind the token to: set it from the downward API ' +
        '(fieldRef spec.nodeName)',
    );
  }
  if (!o.installBinaryOnly && !o.skipMultusConf && o.multusConfFile !== 'auto' && !(await exists(o.multusConfFile))) {
    throw new InstallError(`multus-conf-file ${o.multusConfFile} is not found: give an existing file or "auto"`);
  }
  if (o.skipMultusBinaryCopy) return null;
  if (await exists(o.multusBinFile)) return o.multusBinFile;
  if (!o.multusBinFileSet) return deps.execPath;
  throw new InstallError(`multus-bin-file ${o.multusBinFile} is not found: give the executable to copy`);
}

async function copyBinaries(src: string, o: InstallOptions, deps: InstallDeps): Promise<void> {
  // the Bun executable the launcher starts, first (else the launcher's first run writes it; docs/build.md)
  for (const name of await payloadsBeside(src)) {
    await copyExecutableAtomic(join(dirname(src), name), o.cniBinDir, name);
    deps.log(`${name} ${join(dirname(src), name)} is copied to ${join(o.cniBinDir, name)}`);
  }
  await copyExecutableAtomic(src, o.cniBinDir, 'multus');
  deps.log(`multus binary ${src} is copied to ${join(o.cniBinDir, 'multus')}`);
  let passthru = false;
  for (const extra of ['passthru', 'multus-shim']) {
    const p = join(dirname(src), extra);
    // the image's passthru is a hard link to multus: linked below, not copied (111 MiB more on the node)
    if (extra === basename(src) || !(await exists(p)) || (await sameFile(p, src))) continue;
    await copyExecutableAtomic(p, o.cniBinDir, extra);
    deps.log(`${extra} ${p} is copied to ${join(o.cniBinDir, extra)}`);
    passthru ||= extra === 'passthru';
  }
  // passthru (the auxiliary chain's plugin, docs/behaviour.md#aux-chain) is this executable under that name
  if (!passthru) {
    await linkExecutableAtomic(join(o.cniBinDir, 'multus'), o.cniBinDir, 'passthru');
    deps.log(`passthru is linked to ${join(o.cniBinDir, 'multus')}`);
  }
  // what earlier builds' launchers wrote there (the upgrade path; docs/build.md, "The launcher")
  for (const name of await prunePayloads(o.cniBinDir)) deps.log(`${name} is removed: no launcher there carries it`);
}

/** Writes the kubeconfig when the token or CA changed since `st` (or on the first call). */
async function refreshKubeconfig(o: InstallOptions, deps: InstallDeps, st: State): Promise<void> {
  const caPath = join(o.serviceAccountDir, 'ca.crt');
  const tokenPath = join(o.serviceAccountDir, 'token');
  const ca = await readIfExists(caPath, 'service account CA');
  const token = await readIfExists(tokenPath, 'service account token');
  if (ca === null || token === null) {
    throw new InstallError(
      `service account ${ca === null ? caPath : tokenPath} not found: run in a pod with a service account ` +
        '(automountServiceAccountToken) or set --service-account-dir',
    );
  }
  const credential = o.tokenBinding === 'node' ? ((await nodeBoundToken(o, deps, st, ca, token)) ?? token) : token;
  const caHash = sha256(ca);
  const tokenHash = sha256(credential);
  const kubeconfigPath = join(o.cniConfDir, 'multus.d', 'multus.kubeconfig');
  const same = tokenHash === st.tokenHash && (o.skipTlsVerify || caHash === st.caHash);
  if (same && (await exists(kubeconfigPath))) return;
  const text = renderKubeconfig({
    env: deps.env,
    ca,
    token: credential,
    skipTlsVerify: o.skipTlsVerify,
    caPath,
    tokenPath,
  });
  await mkdirPrivate(join(o.cniConfDir, 'multus.d'), 'the kubeconfig dir');
  await mkdirPrivate(o.multusCniConfDir, 'the multus-cni-conf-dir');
  await writeAtomic(kubeconfigPath, text, 0o600);
  if (st.tokenHash !== null) {
    const changed = `CA (${caHash !== st.caHash}) or SA token (${tokenHash !== st.tokenHash}) changed`;
    deps.log(`${changed} - recreating kubeconfig`);
  }
  deps.log(`kubeconfig is created in ${kubeconfigPath}`);
  st.caHash = caHash;
  st.tokenHash = tokenHash;
}

/**
 * --token-binding=node: the token bound to the node, requested with the mounted one and renewed at 80% of its
 * life; null while none could be had (then the kubeconfig keeps the mounted token and the request is retried
 * every NODE_TOKEN_RETRY_MS; each new failure is logged once).
 */
async function nodeBoundToken(
  o: InstallOptions,
  deps: InstallDeps,
  st: State,
  ca: Buffer,
  mounted: Buffer,
): Promise<Buffer | null> {
  const now = (deps.now ?? Date.now)();
  const n = st.node;
  const valid = n.token !== null && now < n.token.expiresAt ? Buffer.from(n.token.token) : null;
  if (valid && now < n.renewAt) return valid;
  if (now < n.retryAt) return valid;
  const nodeName = deps.env.MULTUS_NODE_NAME ?? '';
  try {
    const token = mounted.toString('utf8').trim();
    const got = await (deps.requestNodeToken ?? requestNodeToken)({
      ...accountOf(token),
      server: apiServerUrl(deps.env),
      ca: o.skipTlsVerify ? null : ca,
      token,
      nodeName,
      expirationSeconds: NODE_TOKEN_SECONDS,
    });
    const renewing = n.token !== null;
    n.token = got;
    n.renewAt = now + 0.8 * (got.expiresAt - now);
    n.lastError = null;
    const until = new Date(got.expiresAt).toISOString();
    deps.log(`${renewing ? 'renewed the' : 'got a'} service account token bound to node ${nodeName} (until ${until})`);
    return Buffer.from(got.token);
  } catch (e) {
    n.retryAt = now + NODE_TOKEN_RETRY_MS;
    const msg = e instanceof Error ? e.message : String(e);
    if (msg !== n.lastError) {
      const keeps = valid ? 'the kubeconfig keeps the last node-bound token' : "the kubeconfig holds the pod's token";
      deps.log(`cannot get a node-bound token (${msg}); ${keeps}, retrying every ${NODE_TOKEN_RETRY_MS / 1000} s`);
    }
    n.lastError = msg;
    return valid;
  }
}

/** The master's path, or null when there is none (yet). */
/** What --cleanup-config-on-exit removes: the generated (or copied) config. */
async function cleanup(o: InstallOptions, deps: InstallDeps): Promise<void> {
  if (o.skipMultusConf) return;
  const files = o.multusConfFile === 'auto' ? GENERATED_FILES : [basename(o.multusConfFile)];
  for (const f of files) {
    if (await removeIfExists(join(o.cniConfDir, f))) deps.log(`removed ${join(o.cniConfDir, f)}`);
  }
}

/** Runs until stopped. Throws InstallError on a failure before the watch; during the watch, logs and retries. */
export async function runInstall(o: InstallOptions, deps: InstallDeps): Promise<void> {
  const src = await verify(o, deps);
  if (o.installBinaryOnly) {
    if (src !== null) await copyBinaries(src, o, deps);
    return;
  }
  const st: State = {
    caHash: null,
    tokenHash: null,
    conf: newConfState(),
    lastError: null,
    deletionAnswered: false,
    node: { token: null, renewAt: 0, retryAt: 0, lastError: null },
  };
  // The kubeconfig before the executables (Multus copies first): the copy takes seconds, and until the new token is
  // written every ADD on the node that reads the API is refused with the old pod's (docs/install.md, "Upgrade").
  await refreshKubeconfig(o, deps, st);
  if (src !== null) await copyBinaries(src, o, deps);
  if (o.cleanupWhenDeleted !== '') await probeDeletion(o, deps, st);
  const auto = o.multusConfFile === 'auto';
  try {
    if (o.skipMultusConf) {
      deps.log('--skip-multus-conf: no 00-multus.conf is written');
    } else if (!auto) {
      await copyGivenConf(o, deps, st.conf);
    } else {
      let said = false;
      while (!(await refreshMultusConf(o, deps, st.conf))) {
        if (!said) deps.log(`waiting for a master CNI config (*.conf, *.conflist) in ${o.multusAutoconfigDir}`);
        said = true;
        if (await deps.sleep(TICK_MS)) return;
      }
    }
    const watch = (auto || o.skipMultusConf) && !o.skipConfigWatch;
    if (watch) deps.log('Entering watch loop...');
    let masterGone = false;
    while (!(await deps.sleep(TICK_MS))) {
      if (!watch) continue;
      try {
        await refreshKubeconfig(o, deps, st);
        if (o.skipMultusConf) continue;
        const found = await refreshMultusConf(o, deps, st.conf);
        if (!found && !masterGone) deps.log('master CNI config has been deleted: waiting for its restoration...');
        if (found && masterGone) deps.log('master CNI config was restored');
        masterGone = !found;
        st.lastError = null;
      } catch (e) {
        const msg = e instanceof InstallError ? e.message : errText(e);
        if (msg !== st.lastError) deps.log(`error (retrying every second, the last good files stay): ${msg}`);
        st.lastError = msg;
      }
    }
  } finally {
    if (o.cleanupConfigOnExit && deps.stopped()) await cleanup(o, deps);
    else if (o.cleanupWhenDeleted !== '' && deps.stopped()) await cleanupIfDeleted(o, deps, st);
  }
}

/** The pod's own credentials (its mounted token and CA) for a call to the API server. */
async function podCredentials(o: InstallOptions, deps: InstallDeps): Promise<PodCredentials> {
  const ca = await readIfExists(join(o.serviceAccountDir, 'ca.crt'), 'service account CA');
  const token = (await readIfExists(join(o.serviceAccountDir, 'token'), 'service account token'))?.toString('utf8');
  if (token === undefined) throw new InstallError(`no service account token in ${o.serviceAccountDir}`);
  return { server: apiServerUrl(deps.env), ca: o.skipTlsVerify ? null : ca, token: token.trim() };
}

/** uninstall.ts's question about the --cleanup-when-deleted DaemonSet, asked with the pod's token. */
async function askDeletion(o: InstallOptions, deps: InstallDeps): Promise<DeletionState> {
  const ref = parseDaemonSetRef(o.cleanupWhenDeleted)!; // checked by options.ts
  try {
    return await (deps.deletionState ?? deletionState)({ ...(await podCredentials(o, deps)), ...ref });
  } catch (e) {
    return { unknown: errText(e) };
  }
}

/** At start: can this pod see its DaemonSet? (A refusal at stop then means the uninstall took its account.) */
async function probeDeletion(o: InstallOptions, deps: InstallDeps, st: State): Promise<void> {
  const state = await askDeletion(o, deps);
  st.deletionAnswered = state === 'present';
  if (!st.deletionAnswered) {
    const what = typeof state === 'object' ? state.unknown : state;
    deps.log(
      `--cleanup-when-deleted: cannot read daemonset ${o.cleanupWhenDeleted} (${what}): the config will stay on uninstall`,
    );
  }
}

/** --cleanup-when-deleted: the config and the kubeconfig go only when the DaemonSet itself was deleted (uninstall.ts). */
async function cleanupIfDeleted(o: InstallOptions, deps: InstallDeps, st: State): Promise<void> {
  const which = `daemonset ${o.cleanupWhenDeleted}`;
  const state = await askDeletion(o, deps);
  if (state !== 'deleted' && !(state === 'revoked' && st.deletionAnswered)) {
    const why =
      state === 'present'
        ? 'is still there (an upgrade or a restart)'
        : `may be there (${typeof state === 'object' ? state.unknown : 'access refused, and it was refused at start too'})`;
    deps.log(`${which} ${why}: keeping the multus config and kubeconfig on this node`);
    return;
  }
  if (state === 'revoked') deps.log(`${which}: access to it was revoked with its account (helm uninstall)`);
  deps.log(`${which} was deleted: removing the multus config and kubeconfig from this node`);
  const files = [
    ...GENERATED_FILES.map((f) => join(o.cniConfDir, f)),
    join(o.cniConfDir, 'multus.d', 'multus.kubeconfig'),
  ];
  for (const f of files) if (await removeIfExists(f)) deps.log(`removed ${f}`);
  if (o.draDriverName !== '') await removeDraSlices(o, deps);
}

/** --dra-driver-name: this node's ResourceSlices of that driver go with the uninstall (uninstall.ts). */
async function removeDraSlices(o: InstallOptions, deps: InstallDeps): Promise<void> {
  const nodeName = deps.env.MULTUS_NODE_NAME ?? '';
  if (nodeName === '') {
    deps.log('--dra-driver-name: MULTUS_NODE_NAME is not set: the kubelet deletes the ResourceSlices instead');
    return;
  }
  try {
    const creds = await podCredentials(o, deps);
    deps.log(await (deps.deleteDraSlices ?? deleteDraSlices)({ ...creds, nodeName, driver: o.draDriverName }));
  } catch (e) {
    deps.log(`--dra-driver-name: ${errText(e)}`);
  }
}
