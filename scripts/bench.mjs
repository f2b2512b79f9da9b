#!/usr/bin/env node
/**
 * Start-up benchmark of build/multus (the SEA executable), run as a container runtime would run it.
 *
 *   npm run bench                          # both scenarios (delegates-only only when the k8s binaries are missing)
 *   npm run bench -- --rounds 100 --scenario delegates-only
 *   npm run bench -- --scenario kubernetes --k8s-rounds 40
 *   node scripts/bench.mjs --exe /tmp/out/multus --rounds 10    # plumbing check (fewer than 50 rounds warns)
 *
 * Scenario `delegates-only` (scripts/bench/delegates-only.mjs) times multus VERSION, ADD and DEL against the
 * floor (`node -e 0` of the base binary) and the trivial delegate alone, rounds interleaved; overhead of a multus
 * ADD (DEL) = its wall time minus, per delegate call it makes, the median wall time of the delegate alone
 * measured in the same run. Peak RSS comes from a separate phase after the timed rounds (scripts/bench/rss.mjs),
 * so the measuring tool adds nothing to the timings. Progress goes to stderr; the last line on stdout is one JSON
 * object (docs/archive/performance.md explains every key).
 *
 * NODE_OPTIONS and NODE_EXTRA_CA_CERTS are never passed to the measured processes: a runtime does not set them,
 * and a CA bundle costs 40-60 ms per Node start.
 *
 * Scenario `kubernetes` (scripts/bench/kubernetes.mjs) runs after `delegates-only` when both are asked for: ADD
 * and DEL of a pod with two NADs against a real kube-apiserver (test/k8s/cluster.ts, run in a helper process),
 * through the lean client and through the client-node fallback, with API requests counted from the audit log.
 * Its figures go under the `kubernetes` key of the JSON; the top-level figures stay those of delegates-only.
 * Scenarios `resident` (scripts/bench/resident.mjs), `density` (scripts/bench/density.mjs), `cluster`
 * (scripts/bench/cluster.mjs), `status` (scripts/bench/status.mjs: STATUS through the four modes) and `parallel`
 * (scripts/bench/parallel.mjs: four 1 s attachments, serial against parallelAttachments) and `dra`
 * (scripts/bench/dra.mjs: networks as DRA devices) run only when asked for, under their own key.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  baseNode,
  contextKeys,
  ensureDelegate,
  ensureExe,
  launcherPayload,
  machine,
  processStart,
  strippedBase,
} from './bench/artifacts.mjs';
import { BenchError, DELEGATE_TYPE, ROOT, boundNetns, fail, say } from './bench/common.mjs';
import { runDelegatesOnly } from './bench/delegates-only.mjs';
import { runCluster } from './bench/cluster.mjs';
import { runDensity } from './bench/density.mjs';
import { k8sBinaries } from './bench/k8s-helper.mjs';
import { runKubernetes } from './bench/kubernetes.mjs';
import { parseArgs } from './bench/options.mjs';
import { runResident } from './bench/resident.mjs';
import { runShimWait } from './bench/shim-wait.mjs';
import { runStatus } from './bench/status.mjs';
import { runParallel } from './bench/parallel.mjs';
import { runDra } from './bench/dra.mjs';

/** The scenarios to run, in order; warns or fails on what this machine lacks. */
function scenariosToRun(opts, k8s) {
  if (opts.scenario === null) {
    opts.scenario = k8s.present ? 'all' : 'delegates-only';
    if (!k8s.present)
      say(`note: scenario kubernetes skipped: no kube-apiserver/etcd in ${k8s.dir} (bash test/k8s/build.sh)`);
  }
  const run = opts.scenario === 'all' ? ['delegates-only', 'kubernetes'] : [opts.scenario];
  if (run.includes('resident') && !k8s.present)
    say(`note: scenario resident without Kubernetes: no kube-apiserver/etcd in ${k8s.dir}`);
  if (run.includes('kubernetes') && !k8s.present)
    fail(`scenario kubernetes needs ${k8s.bins.join(' and ')} (bash test/k8s/build.sh)`);
  if (run.includes('delegates-only') && opts.rounds < 50)
    say(`WARNING: ${opts.rounds} rounds: the figures need at least 50 (--rounds)`);
  return run;
}

/** Runs each scenario into `out`: delegates-only at the top level, the others under their own key. */
async function runScenarios(run, ctx, out) {
  const typed = { ...ctx, delegate: { ...ctx.delegate, type: DELEGATE_TYPE } };
  if (run.includes('delegates-only')) Object.assign(out, await runDelegatesOnly(ctx));
  if (run.includes('kubernetes')) out.kubernetes = await runKubernetes(typed);
  if (run.includes('resident')) out.resident = await runResident({ ...typed, root: ROOT });
  if (run.includes('density')) out.density = await runDensity(ctx);
  if (run.includes('shim-wait')) out.shim_wait = await runShimWait(typed);
  if (run.includes('cluster')) out.cluster = await runCluster(ctx);
  if (run.includes('status')) out.status = await runStatus({ ...typed, root: ROOT });
  if (run.includes('parallel')) out.parallel = await runParallel(ctx);
  if (run.includes('dra')) out.dra = await runDra(ctx);
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const k8s = k8sBinaries(ROOT);
  const run = scenariosToRun(opts, k8s);
  const mach = machine();
  const exe = ensureExe(opts);
  const node = baseNode();
  const stripped = strippedBase(exe);
  const payload = launcherPayload(exe);
  const delegate = ensureDelegate();
  mach.process_start = processStart();
  say(
    mach.process_start.unavailable
      ? `process start probe unavailable: ${mach.process_start.unavailable}`
      : `process start here: glibc's ${mach.process_start.glibc_start_ms} ms per process, cpuid ${mach.process_start.cpuid_us} us`,
  );
  const tmp = mkdtempSync(join(tmpdir(), 'multus-bench-'));
  const out = {
    bench: 'multus-ts startup',
    git_head:
      spawnSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).stdout?.trim() || null,
    scenario: run[0],
    scenarios_run: run,
  };
  const netns = boundNetns(tmp);
  const ctx = { opts, exe, node, stripped, payload, delegate, tmp, netns, mach, k8sPresent: k8s.present };
  try {
    await runScenarios(run, ctx, out);
  } finally {
    spawnSync('umount', [netns]);
    rmSync(tmp, { recursive: true, force: true });
  }
  // Without delegates-only: the context keys it gives, without its figures.
  if (!run.includes('delegates-only')) Object.assign(out, contextKeys(ctx));
  process.stdout.write(JSON.stringify(out) + '\n'); // one line, last: `tail -n1 | jq`
}

main().catch((e) => {
  process.stderr.write(`bench: FAILED: ${e instanceof BenchError ? e.message : e?.stack || e}\n`);
  process.exit(1);
});
