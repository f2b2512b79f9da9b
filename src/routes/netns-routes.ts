/**
 * netns-routes.ts: carrying out a default-route plan (routes.ts) in the pod and in the result caches (I/O).
 *
 * `applyRoutePlan` runs iproute2 inside the pod's network namespace: `nsenter --net=<CNI_NETNS> ip ...`, since `ip -n`
 * only takes names under /var/run/netns and CNI_NETNS is any path. Every child is spawned from an argument array (no
 * shell) with `LC_ALL=C`, so the kernel's messages that decide "nothing to delete" are English whatever the node's
 * locale. All deletes run before any add, so a `replace` never races a delete. `updateCachedDefaultRoutes` rewrites
 * `<cniDir>/results/<net>-<id>-<if>` (libcni's cache, docs/behaviour.md#default-route) through cni/result-cache.ts,
 * so CHECK and DEL get the routes the pod really has as `prevResult`.
 */
import type { ResultCacheEntry } from '../cni/result-cache.ts';
import { encodeResultCache, readResultCache, resultCachePath } from '../cni/result-cache.ts';
import { writeFileAtomic } from '../base/files.ts';
import { CniCode, CniError, messageOf, wrapError } from '../base/errors.ts';
import type { CommandOutput, CommandRunner, RouteTools } from './nsenter.ts';
import { findRouteTools, runCommand } from './nsenter.ts';
import type { IpFamily, RoutePlan } from './routes.ts';
import { changesRoutes, gatewayFamily, rewriteCachedRoutes } from './routes.ts';

export interface NetnsRouteDeps {
  run?: CommandRunner;
  tools?: RouteTools;
}

/** A link with more default routes than this in one family is not something we keep deleting from. */
const MAX_DELETES_PER_FAMILY = 32;

// ---------------------------------------------------------------------------------------------------------
// Running ip in the pod.

interface Runner {
  run: CommandRunner;
  tools: RouteTools;
  netns: string;
}

function commandLine(r: Runner, ipArgs: readonly string[]): string {
  return [r.tools.nsenter, `--net=${r.netns}`, '--', r.tools.ip, ...ipArgs].join(' ');
}

async function ipInNetns(r: Runner, ipArgs: readonly string[]): Promise<CommandOutput> {
  const args = [`--net=${r.netns}`, '--', r.tools.ip, ...ipArgs];
  try {
    return await r.run(r.tools.nsenter, args);
  } catch (err) {
    throw new CniError(
      CniCode.Internal,
      `cannot move the pod's default route: cannot run ${commandLine(r, ipArgs)}: ${messageOf(err)}`,
      {
        cause: err,
        details: 'check that nsenter and ip are executable',
      },
    );
  }
}

function commandError(r: Runner, ipArgs: readonly string[], out: CommandOutput, check: string): CniError {
  const status = out.exitCode === null ? `was killed (${out.signal ?? 'timeout'})` : `exited ${out.exitCode}`;
  const stderr = out.stderr.trim() || '(no output)';
  if (stderr.startsWith('nsenter:')) {
    return new CniError(
      CniCode.InvalidNetns,
      `cannot enter the pod's network namespace: ${commandLine(r, ipArgs)} ${status}: ${stderr}`,
      {
        details: `check that CNI_NETNS ${r.netns} is a network namespace that still exists and that multus runs as root`,
      },
    );
  }
  return new CniError(
    CniCode.Internal,
    `cannot move the pod's default route: ${commandLine(r, ipArgs)} ${status}: ${stderr}`,
    { details: check },
  );
}

/** The kernel's ESRCH for "no such route", or a link that is not there (so it has no route either). */
function isNothingToDelete(out: CommandOutput): boolean {
  return out.exitCode !== 0 && /No such process|Cannot find device/.test(out.stderr);
}

/** Deletes every default route of `family` via `ifName` in the main table, one `ip route del` at a time. */
async function deleteDefaultRoutes(r: Runner, family: IpFamily, ifName: string): Promise<void> {
  const ipArgs = [`-${family}`, 'route', 'del', 'default', 'dev', ifName];
  for (let i = 0; i < MAX_DELETES_PER_FAMILY; i++) {
    const out = await ipInNetns(r, ipArgs);
    if (isNothingToDelete(out)) return;
    if (out.exitCode !== 0)
      throw commandError(
        r,
        ipArgs,
        out,
        `check the IPv${family} routes of ${ifName} in the pod (ip -${family} route show dev ${ifName})`,
      );
  }
  throw new CniError(
    CniCode.Internal,
    `cannot move the pod's default route: ${ifName} still has IPv${family} default routes after ${MAX_DELETES_PER_FAMILY} deletions (${commandLine(r, ipArgs)})`,
    {
      details: `check what keeps adding default routes to ${ifName} in the pod (router advertisements, a routing daemon)`,
    },
  );
}

async function addDefaultRoute(r: Runner, gateway: string, ifName: string): Promise<void> {
  const { family, text } = gatewayFamily(gateway);
  const ipArgs = [`-${family}`, 'route', 'replace', 'default', 'via', text, 'dev', ifName];
  const out = await ipInNetns(r, ipArgs);
  if (out.exitCode !== 0) {
    throw commandError(
      r,
      ipArgs,
      out,
      `check that ${ifName} exists in the pod and that ${text} is inside the subnet of one of its IPv${family} addresses`,
    );
  }
}

/** Everything that can be checked before the pod is touched: interface names and gateways. */
function checkPlan(plan: readonly RoutePlan[]): void {
  for (const entry of plan) {
    if (entry.ifName === '' || entry.ifName.startsWith('-')) {
      throw new CniError(
        CniCode.InvalidConfig,
        `cannot move the pod's default route: invalid interface name ${JSON.stringify(entry.ifName)}`,
      );
    }
    entry.addGateways.forEach(gatewayFamily);
  }
}

/**
 * Moves the pod's default routes as `plan` says, inside the network namespace at path `netns`: first every
 * delete (all entries), then every add (`ip route replace`, so running a plan twice is harmless). Deleting
 * from a link that has no default route, or that is not in the pod, is not an error.
 */
export async function applyRoutePlan(
  netns: string,
  plan: readonly RoutePlan[],
  deps: NetnsRouteDeps = {},
): Promise<void> {
  if (netns === '') throw new CniError(CniCode.InvalidNetns, "cannot move the pod's default route: CNI_NETNS is empty");
  checkPlan(plan);
  const r: Runner = { run: deps.run ?? runCommand, tools: deps.tools ?? findRouteTools(), netns };
  for (const entry of plan) {
    if (entry.deleteV4) await deleteDefaultRoutes(r, 4, entry.ifName);
    if (entry.deleteV6) await deleteDefaultRoutes(r, 6, entry.ifName);
  }
  for (const entry of plan) {
    for (const gateway of entry.addGateways) await addDefaultRoute(r, gateway, entry.ifName);
  }
}

// ---------------------------------------------------------------------------------------------------------
// The libcni result caches.

/** Which cache file an interface's result lives in: the delegate network's `name`, not its display name. */
export interface CachedAttachmentRef {
  ifName: string;
  networkName: string;
}

export type CacheRewriteOutcome = 'rewritten' | 'unchanged' | 'missing';

export interface CacheRewrite {
  ifName: string;
  path: string;
  outcome: CacheRewriteOutcome;
}

/**
 * Rewrites the cached result of every attachment `plan` changes (read, `rewriteCachedRoutes`, atomic write
 * to the same path). A missing file is reported, not an error: there is no cached result to keep consistent.
 * A corrupt file, or a plan entry naming no attachment, is a CniError.
 */
export function updateCachedDefaultRoutes(
  cniDir: string,
  containerId: string,
  attachments: readonly CachedAttachmentRef[],
  plan: readonly RoutePlan[],
): CacheRewrite[] {
  return plan.filter(changesRoutes).map((entry) => {
    const attachment = attachments.find((a) => a.ifName === entry.ifName);
    if (attachment === undefined) {
      throw new CniError(
        CniCode.Internal,
        `cannot rewrite the cached result of interface "${entry.ifName}": no attachment has that interface name`,
      );
    }
    const path = resultCachePath(cniDir, attachment.networkName, containerId, entry.ifName);
    return { ifName: entry.ifName, path, outcome: rewriteOne(cniDir, containerId, attachment, entry, path) };
  });
}

function rewriteOne(
  cniDir: string,
  containerId: string,
  a: CachedAttachmentRef,
  entry: RoutePlan,
  path: string,
): CacheRewriteOutcome {
  const read = readResultCache(cniDir, a.networkName, containerId, a.ifName);
  if (read.kind === 'missing') return 'missing';
  if (read.kind === 'corrupt') throw wrapError(read.error, 'error setting default gateway in cache');
  let result: Record<string, unknown>;
  try {
    result = rewriteCachedRoutes(read.value.result, entry);
  } catch (err) {
    throw wrapError(err, `error setting default gateway in cache ${path}`);
  }
  const before = encode(read.value, read.value.result);
  const after = encode(read.value, result);
  if (after === before) return 'unchanged';
  writeFileAtomic(path, after);
  return 'rewritten';
}

/**
 * The file's bytes with `result`: libcni's cniCacheV1 form, or, for a legacy cache file that holds the raw
 * result (decodeResultCache leaves every identity field empty then), the raw result again.
 */
function encode(entry: ResultCacheEntry, result: Record<string, unknown>): string {
  const legacy =
    entry.containerId === '' && entry.ifName === '' && entry.networkName === '' && entry.config.length === 0;
  return legacy ? JSON.stringify(result) : encodeResultCache({ ...entry, result });
}
