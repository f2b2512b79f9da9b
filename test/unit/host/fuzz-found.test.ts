/**
 * Counterexamples the fuzzing suite (test/fuzz) found, each kept as a plain test of the fixed behaviour.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { handle } from '../../../src/host/handle.ts';
import { createHost } from '../../../src/host/host.ts';
import { FakeExec } from '../../helpers/fake-exec.ts';
import { testNetns } from '../../helpers/netns.ts';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'mts-found-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

function env(command: string): Record<string, string> {
  return {
    CNI_COMMAND: command,
    CNI_CONTAINERID: 'cid1',
    CNI_NETNS: testNetns(),
    CNI_IFNAME: 'eth0',
    CNI_PATH: '/x',
    CNI_ARGS: 'IgnoreUnknown=1',
  };
}

it('a network name too long for its result cache file is refused before the delegate runs; DEL completes', async () => {
  const exec = new FakeExec('p0');
  const host = createHost({ writeStderr: () => {}, exec });
  const conf = {
    cniVersion: '0.3.1',
    name: 'multus-cni-network',
    type: 'multus',
    cniDir: join(dir, 'cni'),
    delegates: [{ cniVersion: '0.3.1', name: 'A'.repeat(300), type: 'p0' }],
  };
  const add = await handle(host, { env: env('ADD'), stdin: Buffer.from(JSON.stringify(conf)) });
  expect(add.exitCode).toBe(1);
  expect(JSON.parse(add.stdout)).toMatchObject({ code: 7, msg: expect.stringContaining('at most 255 allowed') });
  expect(exec.calls()).toEqual([]);
  const del = await handle(host, { env: env('DEL'), stdin: Buffer.from(JSON.stringify(conf)) });
  expect(del.stdout).toBe('');
  expect(exec.calls()).toEqual(['DEL p0 eth0']);
});
