/**
 * Runs the sources' Bun-only paths under Bun for the tests (vitest runs under Node, where those paths are not
 * taken): `bun test/helpers/bun-driver.ts` reads one JSON request on stdin and prints one JSON answer.
 *
 *   {"op":"exec","path":P,"stdin":S,"env":{...},"timeoutMs":N[,"abortAfterMs":N]}  execPlugin (cni/exec.ts: Bun.spawn)
 *     (+ "holdWriteMs":M: the driver keeps P open for writing M ms first, so its first exec is "text file busy")
 *     (+ "outputDir":D: the directory the plugin's unnamed output files go to (cni/plugin-output.ts); none: pipes)
 *   {"op":"kube","kubeconfig":K,"timeoutMs":N,"calls":[{"fn":"getPod","args":[...]}, ...]}
 *                                                               the lean client (k8s/client.ts: fetch)
 *   {"op":"lock","path":P,"waitMs":N}  base/file-lock.ts in one process: the lock taken, a second try of the same
 *     path while it is held, the first released, a third try ({first, second, third})
 *   {"op":"hold","path":P,"holdMs":N}  takes the lock, collects garbage, prints {"held":true}, keeps it N ms
 *     (another process's lock; the caller keeps no reference to it)
 *     (+ "probeHere":true: first tries the held path once more in this process, which must not take it)
 *   {"op":"squat","path":P,"holdMs":N}  binds the lock's socket name as the plain socket any user could bind,
 *     prints {"held":true}, keeps it N ms (run it as a user that is not root)
 *
 * Errors come back as {code, msg, status, reason} (CniError / KubeApiError fields).
 */
import { closeSync, openSync, readFileSync, writeSync } from 'node:fs';
import { lockFile, lockName } from '../../src/base/file-lock.ts';
import { silentLogger } from '../../src/base/log.ts';
import { execPlugin } from '../../src/cni/exec.ts';
import { useOutputFiles } from '../../src/cni/plugin-output.ts';
import { loadKubeClient } from '../../src/k8s/client.ts';

type Json = Record<string, unknown>;

const errorOf = (e: unknown): Json => {
  const x = e as Json;
  return { code: x.code, msg: x.msg ?? (e as Error).message, status: x.status, reason: x.reason };
};

async function exec(req: Json): Promise<Json> {
  useOutputFiles();
  const t = performance.now();
  if (typeof req.holdWriteMs === 'number') {
    const fd = openSync(req.path as string, 'r+');
    setTimeout(() => closeSync(fd), req.holdWriteMs);
  }
  try {
    const out = await execPlugin({
      path: req.path as string,
      stdin: Buffer.from((req.stdin as string) ?? ''),
      env: (req.env as Record<string, string>) ?? {},
      timeoutMs: (req.timeoutMs as number) ?? 10_000,
      ...(typeof req.outputDir === 'string' ? { outputDir: req.outputDir } : {}),
      // the call's cancel signal, aborted after abortAfterMs (a shutdown or a deadline)
      ...(typeof req.abortAfterMs === 'number' ? { signal: AbortSignal.timeout(req.abortAfterMs) } : {}),
    });
    return {
      stdout: out.stdout.toString(),
      stderr: out.stderr.toString(),
      stdoutBytes: out.stdout.length,
      exitCode: out.exitCode,
      signal: out.signal,
      timedOut: out.timedOut,
      ms: performance.now() - t,
    };
  } catch (e) {
    return { error: errorOf(e), ms: performance.now() - t };
  }
}

async function kube(req: Json): Promise<Json> {
  const env = (req.env as Record<string, string>) ?? {};
  const client = await loadKubeClient({
    kubeconfig: req.kubeconfig as string,
    env,
    log: silentLogger,
    ...(req.timeoutMs ? { timeoutMs: req.timeoutMs as number } : {}),
  });
  if (!client) return { error: { msg: 'no client' } };
  const results: Json[] = [];
  for (const call of req.calls as { fn: string; args: unknown[] }[]) {
    try {
      const fn = (client as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>)[call.fn]!;
      results.push({ ok: (await fn.apply(client, call.args)) ?? null });
    } catch (e) {
      results.push({ error: errorOf(e) });
    }
  }
  const count = client.requestCount;
  client.close();
  return { results, requestCount: count };
}

async function lock(req: Json): Promise<Json> {
  const path = req.path as string;
  const waitMs = req.waitMs as number;
  const outcome = (l: unknown) => (l === 'timeout' ? 'timeout' : 'held');
  const first = await lockFile(path, waitMs);
  const second = await lockFile(path, waitMs);
  if (first === 'timeout') return { first: 'timeout' };
  first.release();
  const third = await lockFile(path, waitMs);
  if (third !== 'timeout') third.release();
  return { first: 'held', second: outcome(second), third: outcome(third) };
}

type TestBun = {
  gc(sync: boolean): void;
  listen(o: unknown): unknown;
  hash(s: string, seed?: number): number | bigint;
};
const testBun = (globalThis as unknown as { Bun: TestBun }).Bun;

async function hold(req: Json): Promise<Json> {
  const l = await lockFile(req.path as string, 10_000);
  if (req.probeHere && (await lockFile(req.path as string, 50)) !== 'timeout') throw new Error('locked twice');
  // a full collection first: nothing but the lock module may keep the lock's socket open
  testBun.gc(true);
  writeSync(1, JSON.stringify({ held: l !== 'timeout' }) + '\n');
  await new Promise((r) => setTimeout(r, req.holdMs as number));
  return { done: true };
}

async function squat(req: Json): Promise<Json> {
  testBun.listen({ unix: `\0${lockName(testBun, req.path as string)}`, socket: { data() {} } });
  writeSync(1, JSON.stringify({ held: true }) + '\n');
  await new Promise((r) => setTimeout(r, req.holdMs as number));
  return { done: true };
}

const req = JSON.parse(readFileSync(0, 'utf8')) as Json;
const ops: Record<string, (r: Json) => Promise<Json>> = { exec, kube, lock, hold, squat };
const answer = await ops[req.op as string]!(req);
writeSync(1, JSON.stringify(answer) + '\n');
process.exit(0);
