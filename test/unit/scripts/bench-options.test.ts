/**
 * The resident bench's command line (scripts/bench/options.mjs): `--writeback` is off unless asked for, so runs
 * stay comparable with earlier ones (docs/archive/performance.md, "Files written back before the DEL"); `--api-latency-ms`
 * and its proxy (scripts/bench/api-latency.mjs); the resident bench's thin_ts_direct mode (scripts/bench/resident.mjs
 * directMode: the Bun executable with launcher/main.go's environment, so that thin_ts less it is the launcher's cost).
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
// @ts-expect-error: options.mjs is plain JavaScript with no declaration file (scripts/tsconfig.json checks it)
import { parseArgs } from '../../../scripts/bench/options.mjs';
// @ts-expect-error: plain JavaScript, as options.mjs
import { throughLatency } from '../../../scripts/bench/api-latency.mjs';
// @ts-expect-error: plain JavaScript, as options.mjs
import { directMode } from '../../../scripts/bench/resident.mjs';

describe('bench options', () => {
  it('leaves the DEL right after its ADD by default', () => {
    expect(parseArgs(['--scenario', 'resident']).writeback).toBe('none');
  });

  it('writes back before each DEL when asked, in both spellings', () => {
    expect(parseArgs(['--writeback', 'before-del']).writeback).toBe('before-del');
    expect(parseArgs(['--writeback=before-del', '--page-cache=installed'])).toMatchObject({
      writeback: 'before-del',
      pageCache: 'installed',
    });
  });
});

describe('scenarios status and parallel', () => {
  it('are named, with their rounds (100 STATUS rounds, 3 pairs of each order by default)', () => {
    expect(parseArgs(['--scenario', 'status'])).toMatchObject({ scenario: 'status', statusRounds: 100 });
    expect(parseArgs(['--scenario', 'parallel'])).toMatchObject({ scenario: 'parallel', parallelRounds: 3 });
    expect(parseArgs(['--status-rounds', '20', '--parallel-rounds=5'])).toMatchObject({
      statusRounds: 20,
      parallelRounds: 5,
    });
  });
});

describe('--api-latency-ms', () => {
  it('is off unless asked for', () => {
    expect(parseArgs(['--scenario', 'resident']).apiLatencyMs).toBe(0);
    expect(parseArgs(['--api-latency-ms', '2']).apiLatencyMs).toBe(2);
  });

  it("relays the API server's bytes in order, each way at least the latency later, and names itself in a kubeconfig copy", async () => {
    const echo = createServer((s) => s.pipe(s));
    await new Promise<void>((r) => echo.listen(0, '127.0.0.1', r));
    const port = (echo.address() as AddressInfo).port;
    const dir = mkdtempSync(join(tmpdir(), 'mts-latency-'));
    const kubeconfig = join(dir, 'kubeconfig');
    writeFileSync(kubeconfig, `clusters:\n- cluster:\n    server: https://127.0.0.1:${port}\n`);
    const cl = { server: `https://127.0.0.1:${port}`, kubeconfig };
    const proxy = await throughLatency(process.execPath, cl, 20, join(dir, 'copy'));
    try {
      const proxied = new URL(proxy.cl.server);
      expect(proxied.port).not.toBe(String(port));
      expect(readFileSync(proxy.cl.kubeconfig, 'utf8')).toBe(`clusters:\n- cluster:\n    server: ${proxy.cl.server}\n`);
      const sock = connect({ host: '127.0.0.1', port: Number(proxied.port) });
      await new Promise((r) => sock.once('connect', r));
      const t = performance.now();
      let got = '';
      const echoed = new Promise<void>((r) =>
        sock.on('data', (b) => {
          got += b.toString();
          if (got.length >= 6) r();
        }),
      );
      sock.write('abc');
      sock.write('def');
      await echoed;
      expect(got).toBe('abcdef');
      expect(performance.now() - t).toBeGreaterThanOrEqual(39); // there and back, 20 ms each way (timers: whole ms)
      sock.destroy();
    } finally {
      proxy.stop();
      echo.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('bench resident: thin_ts_direct, the launcher measured by its absence', () => {
  it('is run only when named', () => {
    expect(parseArgs([]).modes).not.toContain('thin_ts_direct');
    expect(parseArgs(['--modes', 'thin_ts,thin_ts_direct,go_thin']).modes).toEqual([
      'thin_ts',
      'thin_ts_direct',
      'go_thin',
    ]);
  });

  it('execs the Bun executable beside the launcher with the environment the launcher gives it', () => {
    const dir = mkdtempSync(join(tmpdir(), 'bench-direct-'));
    try {
      const exe = join(dir, 'multus');
      const id = Buffer.from('0123456789abcdef', 'hex');
      const trailer = Buffer.concat([
        Buffer.alloc(16),
        id,
        Buffer.alloc(24),
        Buffer.from('multus-ts-bun\0\0\x01', 'latin1'),
      ]);
      writeFileSync(exe, Buffer.concat([Buffer.from('launcher'), trailer]));
      writeFileSync(join(dir, '.multus-bun-0123456789abcdef'), 'bun');
      const mode = directMode(exe, '{}');
      expect(mode.file).toBe(join(dir, '.multus-bun-0123456789abcdef'));
      expect(mode.env({ CNI_COMMAND: 'ADD', PATH: '/bin' })).toEqual({
        MULTUS_TS_HELD_CNI_COMMAND: 'ADD',
        MULTUS_TS_HELD_PATH: '/bin',
        MULTUS_TS_LAUNCHER: exe,
        BUN_JSC_useJIT: '0',
        MIMALLOC_PURGE_DELAY: '-1',
      });
      writeFileSync(exe, 'no launcher');
      expect(directMode(exe, '{}')).toMatch(/not the launcher/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('--apiserver-restart', () => {
  it('is off unless asked for, and takes no value: one restart per mode', () => {
    expect(parseArgs(['--scenario', 'cluster']).apiserverRestart).toBe(0);
    expect(parseArgs(['--scenario', 'cluster', '--apiserver-restart', '--nodes', '5000'])).toMatchObject({
      apiserverRestart: 1,
      nodes: 5000,
    });
  });
  it('--apiserver-restarts R: R restarts per mode', () => {
    expect(parseArgs(['--scenario', 'cluster', '--apiserver-restarts', '3']).apiserverRestart).toBe(3);
  });
});
