/**
 * Runs the sources' Bun-only paths under Bun for the tests (vitest runs under Node, where those paths are not
 * taken): `bun test/helpers/bun-driver.ts` reads one JSON request on stdin and prints one JSON answer.
 *
 *   {"op":"exec","path":P,"stdin":S,"env":{...},"timeoutMs":N}  execPlugin (cni/exec.ts: Bun.spawn)
 *     (+ "holdWriteMs":M: the driver keeps P open for writing M ms first, so its first exec is "text file busy")
 *   {"op":"kube","kubeconfig":K,"timeoutMs":N,"calls":[{"fn":"getPod","args":[...]}, ...]}
 *                                                               the lean client (k8s/client.ts: fetch)
 *
 * Errors come back as {code, msg, status, reason} (CniError / KubeApiError fields).
 */
import { closeSync, openSync, readFileSync, writeSync } from 'node:fs';
import { silentLogger } from '../../src/base/log.ts';
import { execPlugin } from '../../src/cni/exec.ts';
import { loadKubeClient } from '../../src/k8s/client.ts';

type Json = Record<string, unknown>;

const errorOf = (e: unknown): Json => {
  const x = e as Json;
  return { code: x.code, msg: x.msg ?? (e as Error).message, status: x.status, reason: x.reason };
};

async function exec(req: Json): Promise<Json> {
  const t = performance.now();
  if (typeof req.holdWriteMs === 'number') {
    const fd = openSync(req.path as string, 'r+');
    setTimeout(() => closeSync(fd), req.holdWriteMs);
  }
  try {
    const out = await execPlugin(
      req.path as string,
      Buffer.from((req.stdin as string) ?? ''),
      (req.env as Record<string, string>) ?? {},
      (req.timeoutMs as number) ?? 10_000,
    );
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

const req = JSON.parse(readFileSync(0, 'utf8')) as Json;
const answer = req.op === 'exec' ? await exec(req) : await kube(req);
writeSync(1, JSON.stringify(answer) + '\n');
process.exit(0);
