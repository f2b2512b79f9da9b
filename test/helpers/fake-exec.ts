/**
 * A hand-written fake of the Exec seam (like libcni's invoke/fakes): it records every plugin call and
 * answers from a script keyed by plugin type and command. No child process runs.
 */
import type { Exec, ExecOptions, ExecOutput } from '../../src/cni/exec.ts';
import { PluginNotFoundError } from '../../src/cni/exec.ts';

export interface FakeCall {
  type: string;
  command: string;
  ifName: string;
  args: string;
  path: string;
  netns: string;
  stdin: Record<string, unknown>;
}

export type FakeReply = Partial<ExecOutput> | ((call: FakeCall) => Partial<ExecOutput>);

export class FakeExec implements Exec {
  readonly received: FakeCall[] = [];
  /** replies[`${type} ${command}`] or replies[type]; default: a 1.0.0 result on ADD, empty otherwise. */
  readonly returns: Record<string, FakeReply> = {};
  readonly known = new Set<string>();

  constructor(...types: string[]) {
    for (const t of types) this.known.add(t);
  }

  findInPath(type: string, dirs: string[]): string {
    if (!this.known.has(type)) throw new PluginNotFoundError(type, dirs);
    return `/fake/${type}`;
  }

  async execPlugin({ path, stdin, env }: ExecOptions): Promise<ExecOutput> {
    const type = path.slice('/fake/'.length);
    const call: FakeCall = {
      type,
      command: env.CNI_COMMAND ?? '',
      ifName: env.CNI_IFNAME ?? '',
      args: env.CNI_ARGS ?? '',
      path: env.CNI_PATH ?? '',
      netns: env.CNI_NETNS ?? '',
      stdin: JSON.parse(stdin.toString()) as Record<string, unknown>,
    };
    this.received.push(call);
    const reply = this.returns[`${type} ${call.command}`] ?? this.returns[type];
    const partial = typeof reply === 'function' ? reply(call) : reply;
    const out: ExecOutput = {
      stdout: Buffer.alloc(0),
      stderr: Buffer.alloc(0),
      exitCode: 0,
      signal: null,
      timedOut: false,
    };
    if (call.command === 'ADD' && !partial) out.stdout = Buffer.from(JSON.stringify(defaultResult(call)));
    return { ...out, ...partial };
  }

  calls(): string[] {
    return this.received.map((c) => `${c.command} ${c.type} ${c.ifName}`);
  }
}

export function defaultResult(call: FakeCall): Record<string, unknown> {
  if (call.stdin.prevResult) return call.stdin.prevResult as Record<string, unknown>;
  return {
    cniVersion: '1.0.0',
    interfaces: [{ name: call.ifName, mac: '02:00:00:00:00:01', sandbox: '/var/run/netns/test' }],
    ips: [{ address: '10.1.0.2/24', gateway: '10.1.0.1', interface: 0 }],
    routes: [{ dst: '0.0.0.0/0', gw: '10.1.0.1' }],
    dns: {},
  };
}

export function cniErrorReply(code: number, msg: string): Partial<ExecOutput> {
  return { exitCode: 1, stdout: Buffer.from(JSON.stringify({ cniVersion: '1.0.0', code, msg })) };
}
