/**
 * request.ts: the CNI protocol edge, as libcni's pkg/skel does it (pure).
 *
 * Turns the runtime's `CNI_*` environment and stdin bytes into one validated `CniRequest`: the command, the
 * env table (which variables each command requires, and their validators), the container ID, interface name
 * and network name rules of libcni pkg/utils, and the version gate per command (CHECK needs 0.4.0, STATUS and
 * GC need 1.1.0). It also formats the VERSION reply and the "about" text. Every rejection is a `CniError`
 * with the spec code skel uses (docs/behaviour.md#protocol-edge, docs/behaviour.md#protocol-rules). No I/O: the
 * process edge (cli.ts, or the daemon's server) reads the environment and stdin and hands them in.
 */
import { CniCode, CniError } from '../base/errors.ts';
import { decodeJsonObject } from '../base/json.ts';
import { validateContainerId, validateIfName, validateNetworkName } from '../base/names.ts';
import {
  CURRENT_VERSION,
  SUPPORTED_VERSIONS,
  isSupportedVersion,
  versionAtLeast,
  versionOrDefault,
} from '../base/versions.ts';

export type Command = 'ADD' | 'DEL' | 'CHECK' | 'STATUS' | 'GC' | 'VERSION';

/** What the env table gives a call (the CNI_* variables but the command), checked. */
export interface CallEnv {
  containerId: string;
  netns: string;
  ifName: string;
  args: string;
  path: string[];
  netnsOverride: boolean;
}

export interface CniRequest extends CallEnv {
  command: RequestCommand;
  config: Record<string, unknown>;
  cniVersion: string;
  stdin: Buffer;
}

/** A command that carries a config on stdin (and runs delegates): every command but VERSION. */
export type RequestCommand = Exclude<Command, 'VERSION'>;
/** A process environment, or the CNI_* variables of a request. */
export type Env = Record<string, string | undefined>;

/**
 * The most stdin bytes a call reads: the daemon's body limit (daemon/wire.ts). A runtime's network config is a few
 * KiB; an endless stdin (/dev/zero) must end in an answer, not in the OOM killer (docs/reliability.md).
 */
export const MAX_STDIN_BYTES = 1024 * 1024;

/** The answer to a stdin over MAX_STDIN_BYTES (code 6: it cannot be decoded). */
export function stdinTooLarge(): CniError {
  return new CniError(CniCode.DecodingFailure, `the network config on stdin is larger than ${MAX_STDIN_BYTES} bytes`, {
    details: 'a CNI network config is a JSON object of a few KiB: check what the runtime passes on stdin',
  });
}

const COMMANDS: readonly Command[] = ['ADD', 'DEL', 'CHECK', 'STATUS', 'GC', 'VERSION'];

/** Oldest config version each command exists in (skel's gates); absent = no gate. */
const MIN_VERSION: Partial<Record<RequestCommand, string>> = { CHECK: '0.4.0', STATUS: '1.1.0', GC: '1.1.0' };

interface EnvVar {
  name: string;
  field: 'containerId' | 'netns' | 'ifName' | 'args' | 'path' | 'netnsOverride';
  /** Commands that read it; for the others the field stays '' (GC and STATUS have no container). */
  readFor: readonly RequestCommand[];
  requiredFor: readonly RequestCommand[];
  validate?: (value: string) => void;
}

const CONTAINER_COMMANDS: readonly RequestCommand[] = ['ADD', 'CHECK', 'DEL'];
const ALL_COMMANDS: readonly RequestCommand[] = ['ADD', 'CHECK', 'DEL', 'STATUS', 'GC'];

/** The skel env table (cni v1.3.0 `getCmdArgsFromEnv`), one row per variable. */
const ENV_TABLE: readonly EnvVar[] = [
  {
    name: 'CNI_CONTAINERID',
    field: 'containerId',
    readFor: CONTAINER_COMMANDS,
    requiredFor: CONTAINER_COMMANDS,
    validate: validateContainerId,
  },
  { name: 'CNI_NETNS', field: 'netns', readFor: CONTAINER_COMMANDS, requiredFor: ['ADD', 'CHECK'] },
  {
    name: 'CNI_IFNAME',
    field: 'ifName',
    readFor: CONTAINER_COMMANDS,
    requiredFor: CONTAINER_COMMANDS,
    validate: validateIfName,
  },
  { name: 'CNI_PATH', field: 'path', readFor: ALL_COMMANDS, requiredFor: ALL_COMMANDS },
  { name: 'CNI_ARGS', field: 'args', readFor: ALL_COMMANDS, requiredFor: [] },
  { name: 'CNI_NETNS_OVERRIDE', field: 'netnsOverride', readFor: CONTAINER_COMMANDS, requiredFor: [] },
];

/**
 * The command from `CNI_COMMAND`. Returns '' when it is unset or empty: skel then prints the about text to
 * stderr and exits 0, which is handle()'s job. Case-sensitive, as skel's switch is.
 */
export function parseCommand(env: Env): Command | '' {
  const value = env.CNI_COMMAND ?? '';
  if (value === '') return '';
  if ((COMMANDS as readonly string[]).includes(value)) return value as Command;
  throw new CniError(
    CniCode.InvalidEnv,
    `unknown CNI_COMMAND ${JSON.stringify(value)}: expected one of ${COMMANDS.join(', ')}`,
  );
}

/**
 * Validates env and stdin for one command, in skel's order: env table (all missing variables reported at
 * once), then the config (JSON object, network name), then the version gate.
 */
export function parseRequest(command: RequestCommand, env: Env, stdin: Buffer): CniRequest {
  const callEnv = readCallEnv(command, env);
  const config = decodeConfig(stdin);
  validateNetworkName(stringField(config, 'name'));
  const cniVersion = versionOrDefault(stringField(config, 'cniVersion'));
  checkVersion(command, cniVersion);
  return { command, ...callEnv, config, cniVersion, stdin };
}

/**
 * The env table's variables of `command`, checked: every missing one reported at once, then the validators.
 * `required` replaces skel's list of required variables, for an endpoint with rules of its own (the daemon's
 * `/delegate` needs CNI_ARGS and no CNI_PATH).
 */
export function readCallEnv(command: RequestCommand, env: Env, required?: readonly string[]): CallEnv {
  const fields: Record<EnvVar['field'], string> = {
    containerId: '',
    netns: '',
    ifName: '',
    args: '',
    path: '',
    netnsOverride: '',
  };
  const missing: string[] = [];
  for (const row of ENV_TABLE) {
    if (!row.readFor.includes(command)) continue;
    const value = env[row.name] ?? '';
    const isRequired = required ? required.includes(row.name) : row.requiredFor.includes(command);
    if (value === '' && isRequired) missing.push(row.name);
    fields[row.field] = value;
  }
  if (missing.length > 0) {
    throw new CniError(CniCode.InvalidEnv, `required env variables [${missing.join(',')}] missing`);
  }
  for (const row of ENV_TABLE) {
    if (row.validate && fields[row.field] !== '') row.validate(fields[row.field]);
  }
  return {
    containerId: fields.containerId,
    netns: fields.netns,
    ifName: fields.ifName,
    args: fields.args,
    path: fields.path.split(':').filter((dir) => dir !== ''),
    // skel: CNI_NETNS_OVERRIDE is "true" (any case) or "1".
    netnsOverride: fields.netnsOverride.toUpperCase() === 'TRUE' || fields.netnsOverride === '1',
  };
}

function decodeConfig(stdin: Buffer): Record<string, unknown> {
  const prefix = 'failed to decode network config from stdin';
  return decodeJsonObject(stdin, (p) =>
    'syntax' in p
      ? new CniError(CniCode.DecodingFailure, `${prefix}: ${p.syntax}`, { cause: p.cause })
      : new CniError(CniCode.DecodingFailure, `${prefix}: want a JSON object, got ${p.got}`),
  );
}

/**
 * A string key of the config; absent or null reads as '' (Go leaves the field empty), any other type is a
 * decoding failure (Go's json.Unmarshal into a string field fails).
 */
function stringField(config: Record<string, unknown>, key: string): string {
  const value = config[key];
  if (value === undefined || value === null) return '';
  if (typeof value !== 'string') {
    throw new CniError(
      CniCode.DecodingFailure,
      `failed to decode network config from stdin: "${key}" must be a string, got ${JSON.stringify(value)}`,
    );
  }
  return value;
}

/**
 * skel checks the command's minimum version before membership in the supported list, so CHECK with 0.3.5
 * says "does not allow CHECK". A malformed version skips the gate and fails the membership test.
 */
function checkVersion(command: RequestCommand, cniVersion: string): void {
  const minimum = MIN_VERSION[command];
  if (minimum !== undefined && /^\d+\.\d+\.\d+$/.test(cniVersion) && !versionAtLeast(cniVersion, minimum)) {
    throw new CniError(CniCode.IncompatibleVersion, `config version does not allow ${command}`, {
      details: `${command} needs cniVersion ${minimum} or later, config is ${JSON.stringify(cniVersion)}`,
    });
  }
  if (!isSupportedVersion(cniVersion)) {
    throw new CniError(
      CniCode.IncompatibleVersion,
      `incompatible CNI versions: config is ${JSON.stringify(cniVersion)}, plugin supports [${SUPPORTED_VERSIONS.join(', ')}]`,
    );
  }
}

/** The VERSION reply (skel `PluginInfo`). */
export function versionInfo(): { cniVersion: string; supportedVersions: string[] } {
  return { cniVersion: CURRENT_VERSION, supportedVersions: [...SUPPORTED_VERSIONS] };
}

/** The VERSION reply as skel's `PluginInfo.Encode` prints it, without the trailing newline. */
export function formatVersionInfo(): string {
  return JSON.stringify(versionInfo());
}

/**
 * What skel prints to stderr for an empty CNI_COMMAND: the about line, then the supported versions, each
 * ending in a newline. The about wording is Multus' own (cmd/multus/main.go).
 */
export function aboutText(version: string): string {
  return (
    `multus-ts ${version}: meta-plugin that delegates to other CNI plugins\n` +
    `CNI protocol versions supported: ${SUPPORTED_VERSIONS.join(', ')}\n`
  );
}
