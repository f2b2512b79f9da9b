/**
 * auxchain.ts: the auxiliary CNI chain (`auxiliaryCNIChainName`, docs/behaviour.md#aux-chain) and the `passthru` plugin
 * it starts with (docs/behaviour.md#aux-chain). Pure, except for listing and reading the chain's directory.
 *
 * The chain is a conflist built in memory: `passthru` first, then every `*.conf` in
 * `<dir of clusterNetwork>/<chain name>/` in lexical order. It runs as the last attachment (net<i>) so
 * plugins that act on the whole pod (sysctls, routes) run after every interface exists. Built as an object
 * and serialised, never by string formatting (Multus uses Sprintf).
 */
import { readFileSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { MultusConf } from './conf.ts';
import type { Network } from '../cni/network.ts';
import { parseNetwork } from '../cni/network.ts';
import { CniCode, CniError, messageOf } from '../base/errors.ts';
import { parseJsonObject } from '../base/json.ts';
import { jsonSyntaxMessage } from '../base/json-syntax.ts';
import { VALID_NAME } from '../base/names.ts';
import type { Logger } from '../base/log.ts';
import type { Delegate } from './attachments.ts';
import { SUPPORTED_VERSIONS } from '../base/versions.ts';

/**
 * The auxiliary chain's delegate, or undefined when none is configured or its directory adds no plugin. compat: a chain
 * that cannot be loaded is logged and skipped (docs/behaviour.md#aux-chain); a clusterNetwork that is not a path is an
 * error, as in Multus.
 */
export function auxiliaryChain(conf: MultusConf, log: Logger): Delegate | undefined {
  const name = conf.auxiliaryCNIChainName;
  if (!name) return undefined;
  if (!conf.clusterNetwork.includes('/')) {
    throw new CniError(
      CniCode.InvalidConfig,
      `auxiliary chain used but clusterNetwork must be a path, and it is not a path: ${conf.clusterNetwork}`,
    );
  }
  try {
    const network = loadChain(conf, name);
    return network.plugins.length > 1 ? { network, displayName: name, request: {}, source: 'auxiliary' } : undefined;
  } catch (e) {
    log.error(`auxiliary chain "${name}" skipped: ${messageOf(e)}`);
    return undefined;
  }
}

function loadChain(conf: MultusConf, name: string): Network {
  if (!VALID_NAME.test(name)) throw new CniError(CniCode.InvalidConfig, `invalid auxiliaryCNIChainName "${name}"`);
  const dir = join(dirname(conf.clusterNetwork), name);
  let files: string[] = [];
  try {
    files = readdirSync(dir)
      .filter((f) => f.endsWith('.conf'))
      .sort();
  } catch {
    // no directory: the chain is just passthru, and is not added
  }
  const plugins: Record<string, unknown>[] = [{ type: 'passthru', name: 'passthru-cni' }];
  for (const file of files)
    plugins.push(parseJsonObject(readFileSync(join(dir, file)), `auxiliary chain plugin ${join(dir, file)}`));
  return parseNetwork({ cniVersion: conf.cniVersion, name, plugins });
}

/**
 * The `passthru` plugin: ADD prints an empty result in the config's version (or passes prevResult through);
 * every other command succeeds with no output. It is this same executable, run under the name `passthru`.
 */
/** Multus' passthru: version.PluginSupports("0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"). */
const PASSTHRU_VERSIONS = SUPPORTED_VERSIONS.filter((v) => v >= '0.3.0');

/** What Multus' passthru (skel) prints on stderr when CNI_COMMAND is empty: its about text and versions. */
export const PASSTHRU_ABOUT = `Passthrough CNI Plugin v1.0\nCNI protocol versions supported: ${PASSTHRU_VERSIONS.join(', ')}\n`;

export function passthru(command: string, stdin: Buffer): string {
  if (command === 'VERSION') {
    return JSON.stringify({ cniVersion: '1.1.0', supportedVersions: PASSTHRU_VERSIONS });
  }
  if (command !== 'ADD') return '';
  let conf: { cniVersion?: string; prevResult?: unknown };
  const text = stdin.toString();
  try {
    conf = JSON.parse(text) as typeof conf;
  } catch {
    throw new CniError(
      CniCode.DecodingFailure,
      `passthru: failed to decode the network config from stdin: ${jsonSyntaxMessage(text)}`,
    );
  }
  if (conf.prevResult) return JSON.stringify(conf.prevResult);
  return JSON.stringify({ cniVersion: conf.cniVersion ?? '1.0.0', interfaces: [], ips: [], routes: [], dns: {} });
}
