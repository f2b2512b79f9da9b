/**
 * build/multus daemon gives back its executable's file pages at rest (daemon/pages.ts): once ready and idle, the
 * executable's read-only pages (code and read-only data, what the drop may unmap; its writable data stays) fall
 * below half of those of a daemon started with `dropIdleFilePages: false`, and the
 * daemon still serves a call afterwards (the pages it needs fault back in from the page cache); a /metrics scrape,
 * which maps code back without a CNI request, is followed by a drop too. Needs root and build/multus.
 */
import type { ChildProcess } from 'node:child_process';
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { fileExists, isRoot, needs } from '../helpers/skip.ts';
import { cniBody, http } from '../helpers/daemon.ts';
import { testNetns } from '../helpers/netns.ts';

const EXE = resolve('build/multus');
const ready = () => needs(isRoot(), fileExists(EXE, 'the built executable (npm run build)'));

let dir: string;
const children: ChildProcess[] = [];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'mts-daemon-pages-'));
  mkdirSync(join(dir, 'bin'));
  writeFileSync(
    join(dir, 'bin', 'ok'),
    `#!/bin/sh\ncat >/dev/null\necho '{"cniVersion":"1.0.0","ips":[{"address":"10.9.0.2/24"}]}'\n`,
    { mode: 0o755 },
  );
});
afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

/** A daemon of its own directory under `dir`, its config with `extra`; returns the child and its socket. */
function startDaemon(name: string, extra: Record<string, unknown>): { child: ChildProcess; socket: string } {
  const base = join(dir, name);
  mkdirSync(join(base, 'net.d'), { recursive: true });
  writeFileSync(join(base, 'net.d', '10-ok.conf'), JSON.stringify({ cniVersion: '1.0.0', name: 'ok', type: 'ok' }));
  const file = join(base, 'daemon-config.json');
  const cfg = { socketDir: join(base, 'run'), cniConfigDir: join(base, 'net.d'), binDir: join(dir, 'bin') };
  writeFileSync(file, JSON.stringify({ ...cfg, cniDir: join(base, 'cache'), shutdownDrainSeconds: 0, ...extra }));
  const child = spawn(EXE, ['daemon', '--config', file], { env: { PATH: '/usr/bin:/bin' }, stdio: 'ignore' });
  children.push(child);
  return { child, socket: join(base, 'run', 'multus.sock') };
}

/**
 * KiB of the daemon's executable (the Bun program the launcher exec'd) resident in its read-only mappings: code and
 * read-only data, the pages the drop unmaps. Its writable data (3.6 MiB on Bun 1.4.6-canary.1, 6 MiB on 1.4.5)
 * stays and is left out, or it would hide the drop on a runtime whose start maps little code.
 */
function exeRssKib(pid: number): number {
  const exe = readlinkSync(`/proc/${pid}/exe`);
  let ours = false;
  let kib = 0;
  for (const line of readFileSync(`/proc/${pid}/smaps`, 'utf8').split('\n')) {
    const head = /^[0-9a-f]+-[0-9a-f]+ (\S+) \S+ \S+ \d+\s*(.*)$/.exec(line);
    if (head) ours = head[2] === exe && head[1]![1] !== 'w';
    else if (ours && line.startsWith('Rss:')) kib += Number(/(\d+)/.exec(line)![1]);
  }
  return kib;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until(cond: () => boolean, what: string, tries = 1500): Promise<void> {
  for (let i = 0; i < tries && !cond(); i++) await sleep(10);
  if (!cond()) throw new Error(`timed out waiting for ${what}`);
}

describe('the daemon at rest', () => {
  it.runIf(ready())('unmaps its executable pages (kept with dropIdleFilePages: false) and serves on', async () => {
    const netns = testNetns();
    const dropping = startDaemon('a', {});
    const keeping = startDaemon('b', { dropIdleFilePages: false });
    await until(() => existsSync(dropping.socket) && existsSync(keeping.socket), 'the daemons to listen');
    const conf = {
      cniVersion: '1.0.0',
      name: 'pages',
      type: 'multus',
      cniDir: join(dir, 'cache'), // not the node's /var/lib/cni/multus
      delegates: [{ cniVersion: '1.0.0', name: 'ok', type: 'ok' }],
    };
    const add = (socket: string, cid: string) =>
      http(socket, '/cni', {
        body: cniBody(
          {
            CNI_COMMAND: 'ADD',
            CNI_CONTAINERID: cid,
            CNI_NETNS: netns,
            CNI_IFNAME: 'eth0',
            CNI_PATH: join(dir, 'bin'),
          },
          conf,
        ),
      });
    for (const d of [dropping, keeping]) expect((await add(d.socket, 'c1')).status).toBe(200);
    // at rest 1 s after the call: the dropping daemon's executable pages fall below half of the other's
    const a = dropping.child.pid!;
    const b = keeping.child.pid!;
    await until(() => exeRssKib(a) * 2 < exeRssKib(b), 'the executable pages to be given back', 3000);
    const kept = exeRssKib(b);
    expect(kept).toBeGreaterThan(8 * 1024); // the other holds its start-up's code (15 MiB on the canary, 40 on 1.4.5)
    const answer = await add(dropping.socket, 'c2'); // the code it needs faults back in
    expect(answer.status).toBe(200);
    expect(answer.json()).toMatchObject({ Result: { ips: [{ address: '10.9.0.2/24' }] } });
  });

  it.runIf(ready())('after a /metrics scrape too: the code it mapped back is unmapped again', async () => {
    const port = await new Promise<number>((resolve, reject) => {
      const probe = createServer();
      probe.once('error', reject);
      probe.listen(0, '127.0.0.1', () => {
        const p = (probe.address() as { port: number }).port;
        probe.close(() => resolve(p));
      });
    });
    const d = startDaemon('m', { metricsPort: port, metricsBindAddress: '127.0.0.1' });
    await until(() => existsSync(d.socket), 'the daemon to listen');
    const pid = d.child.pid!;
    const started = exeRssKib(pid);
    await until(() => exeRssKib(pid) * 2 < started, 'the first drop, once ready', 3000);
    await sleep(500);
    const rested = exeRssKib(pid);
    const res = await fetch(`http://127.0.0.1:${port}/metrics`);
    expect(res.status).toBe(200);
    await res.text();
    const scraped = exeRssKib(pid);
    expect(scraped).toBeGreaterThan(rested); // rendering the metrics ran code that was unmapped
    await until(() => exeRssKib(pid) < rested + (scraped - rested) / 2, 'the drop after the scrape', 3000);
  });
});
