/**
 * routes/nsenter.ts: running iproute2 inside a pod's network namespace from outside it (I/O): the absolute paths
 * of nsenter and ip, a runner that spawns from an argument array (no shell) with `LC_ALL=C` and a timeout, and
 * the link names of a netns (what hot-plug checks an interface name against). `nsenter --net=<CNI_NETNS> ip ...`,
 * since `ip -n` only takes names under /var/run/netns and CNI_NETNS is any path.
 * Tested by test/unit/routes/netns-routes.test.ts, test/unit/hotplug/delegate.test.ts.
 */
import { accessSync, constants } from 'node:fs';
import { CniCode, CniError } from '../base/errors.ts';

export interface CommandOutput {
  exitCode: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
}

/** Runs `file` with `args`, no shell; rejects only when the process cannot be started. */
export type CommandRunner = (file: string, args: readonly string[]) => Promise<CommandOutput>;

export interface RouteTools {
  nsenter: string;
  ip: string;
}

const NSENTER_CANDIDATES = ['/usr/bin/nsenter', '/bin/nsenter', '/usr/sbin/nsenter', '/sbin/nsenter'];
const IP_CANDIDATES = ['/sbin/ip', '/usr/sbin/ip', '/usr/bin/ip', '/bin/ip'];
const COMMAND_TIMEOUT_MS = 10_000;

function firstExecutable(candidates: readonly string[], what: string): string {
  for (const path of candidates) {
    try {
      accessSync(path, constants.X_OK);
      return path;
    } catch {
      // not here: try the next candidate
    }
  }
  throw new CniError(
    CniCode.Internal,
    `cannot move the pod's default route: ${what} not found at ${candidates.join(', ')}`,
    {
      details: `install ${what === 'ip' ? 'iproute2' : 'util-linux'} on the node`,
    },
  );
}

let foundTools: RouteTools | undefined;

/** Absolute paths of nsenter and ip, looked up once per process (a failed lookup is retried next time). */
export function findRouteTools(): RouteTools {
  foundTools ??= { nsenter: firstExecutable(NSENTER_CANDIDATES, 'nsenter'), ip: firstExecutable(IP_CANDIDATES, 'ip') };
  return foundTools;
}

/** The default `CommandRunner`: spawn, collect output, kill after 10 s, C locale. */
export const runCommand: CommandRunner = (file, args) =>
  new Promise((resolve, reject) => {
    // Loaded here: node:child_process costs every call at start-up and only default-route uses it.
    const { spawn } = process.getBuiltinModule('node:child_process');
    const child = spawn(file, args, {
      env: { LC_ALL: 'C', PATH: '/usr/sbin:/usr/bin:/sbin:/bin' },
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: COMMAND_TIMEOUT_MS,
      killSignal: 'SIGKILL',
    });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (b: Buffer) => out.push(b));
    child.stderr.on('data', (b: Buffer) => err.push(b));
    child.on('error', reject);
    child.on('close', (exitCode, signal) => {
      resolve({
        exitCode,
        signal,
        stdout: Buffer.concat(out).toString('utf8'),
        stderr: Buffer.concat(err).toString('utf8'),
      });
    });
  });

/** Lists the interface names inside a network namespace given by path. */
export interface SandboxLinks {
  names(netns: string): Promise<string[]>;
}

/** `ip -j link show` inside the netns (nsenter, argv only). */
export const nsenterLinks: SandboxLinks = {
  async names(netns) {
    const tools = findRouteTools();
    const out = await runCommand(tools.nsenter, [`--net=${netns}`, '--', tools.ip, '-j', 'link', 'show']);
    if (out.exitCode !== 0) {
      throw new CniError(
        CniCode.InvalidNetns,
        `cannot list the interfaces of ${netns}: ${out.stderr.trim() || `exit ${out.exitCode}`}`,
        {
          details: "check that CNI_NETNS is the pod sandbox's network namespace and that it still exists",
        },
      );
    }
    const links = JSON.parse(out.stdout) as { ifname?: string }[];
    return links.map((l) => l.ifname ?? '').filter((n) => n !== '');
  },
};
