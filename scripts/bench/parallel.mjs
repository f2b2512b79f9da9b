/**
 * Scenario `parallel` of scripts/bench.mjs: a pod of four attachments whose delegate (the test recorder,
 * test/data/bin/recorder) sleeps 1 s on ADD and on DEL, attached and detached with Multus' order (serial) and with
 * `"parallelAttachments": true`, rounds alternated, through build/multus (thin_ts) and, when build/multus-shim
 * exists, through the shim and `build/multus daemon` (resident_ts) (docs/behaviour.md#parallel-attachments,
 * docs/performance.md, "Attachments at once"). Per mode and order: ADD and DEL wall times, whether the results were
 * the same, and the most delegate calls that ran at once (from the recorder's spans).
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { ROOT, RUNTIME_PATH, checkAdd, checkDel, cniEnv, fail, r2, say, stats, timed } from './common.mjs';
import { startTsDaemon } from './daemons.mjs';

const FIXTURE_BIN = join(ROOT, 'test/data/bin');
const SLEEP_MS = 1000;
const ATTACHMENTS = 4;

export const description =
  `a pod of ${ATTACHMENTS} attachments, each a delegate that sleeps ${SLEEP_MS} ms on ADD and DEL (test/data/bin/recorder), ` +
  'serial (Multus order) against "parallelAttachments": true, rounds alternated';

/** The multus config: four recorder delegates; `parallel` sets the key. */
function multusConf(tmp, mode, parallel) {
  const sleep = { sleepMs: SLEEP_MS };
  return {
    cniVersion: '1.0.0',
    name: 'multus-bench-parallel',
    type: 'multus',
    cniDir: join(tmp, `cni-parallel-${mode}`),
    binDir: FIXTURE_BIN,
    delegates: Array.from({ length: ATTACHMENTS }, (_, i) => ({
      cniVersion: '1.0.0',
      name: `net-${i}`,
      type: 'recorder',
      recorder: { reply: { ADD: sleep, DEL: sleep } },
    })),
    ...(parallel ? { parallelAttachments: true } : {}),
  };
}

/** The most spans of `file` that overlap one another at some instant (of calls of `command`). */
function mostAtOnce(file, command) {
  if (!existsSync(file)) return null;
  const spans = readFileSync(file, 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l))
    .filter((s) => s.command === command);
  const edges = spans.flatMap((s) => [
    [s.start, 1],
    [s.end, -1],
  ]);
  edges.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let now = 0;
  let most = 0;
  for (const [, d] of edges) most = Math.max(most, (now += d));
  return most;
}

/** Where the recorder writes its spans: one file per mode and order (the daemon's delegates get it from its env). */
const spansFile = (ctx, mode, order) => join(ctx.tmp, `spans-${mode}-${order}.jsonl`);

/** One ADD and DEL of a new pod through `mode`, with `order`'s config. */
function pair(ctx, mode, order) {
  const id = randomBytes(32).toString('hex');
  const spans = spansFile(ctx, mode.name, order);
  const base = { PATH: `${dirname(ctx.node)}:${RUNTIME_PATH}`, RECORDER_SPANS: spans };
  const pod = {
    id,
    netns: ctx.netns,
    cniPath: FIXTURE_BIN,
    namespace: 'bench',
    name: `pod-${id.slice(0, 6)}`,
    uid: 'u',
    base,
  };
  const conf = JSON.stringify(mode.confs[order]);
  const add = timed(mode.file, [], cniEnv({ command: 'ADD', ...pod }), conf);
  const result = checkAdd(`parallel ${mode.name} ${order}`, add);
  const del = timed(mode.file, [], cniEnv({ command: 'DEL', ...pod }), conf);
  checkDel(`parallel ${mode.name} ${order}`, del);
  const most = { add: mostAtOnce(spans, 'ADD'), del: mostAtOnce(spans, 'DEL') };
  rmSync(spans, { force: true });
  return { add: add.ms, del: del.ms, result: JSON.stringify(result), most };
}

/** The modes: thin_ts always, resident_ts with build/multus-shim and a daemon serving each order's config. */
async function modesOf(ctx, daemons) {
  const thin = { name: 'thin_ts', file: ctx.exe, what: 'build/multus' };
  thin.confs = { serial: multusConf(ctx.tmp, 'thin', false), parallel: multusConf(ctx.tmp, 'thin', true) };
  const modes = [thin];
  const shim = join(dirname(ctx.exe), 'multus-shim');
  if (!existsSync(shim)) {
    say(`parallel: resident_ts unavailable: ${shim} is missing`);
    return modes;
  }
  const resident = { name: 'resident_ts', file: shim, what: 'build/multus-shim + build/multus daemon', confs: {} };
  for (const order of ['serial', 'parallel']) {
    const conf = multusConf(ctx.tmp, `resident-${order}`, order === 'parallel');
    const env = { PATH: `${dirname(ctx.node)}:${RUNTIME_PATH}`, RECORDER_SPANS: spansFile(ctx, resident.name, order) };
    const ts = await startTsDaemon(
      { exe: ctx.exe, tmp: ctx.tmp, daemons },
      `parallel-${order}`,
      { conf, daemon: {} },
      env,
    );
    if (ts.error) fail(`parallel: ${ts.error}`);
    resident.confs[order] = { ...conf, type: 'multus-shim', daemonSocketDir: ts.sock };
  }
  modes.push(resident);
  return modes;
}

/** Runs the scenario (`ctx` = {opts, exe, node, tmp, netns}); returns the object printed under `parallel`. */
export async function runParallel(ctx) {
  const load0 = r2(loadavg()[0]);
  const daemons = [];
  mkdirSync(ctx.tmp, { recursive: true });
  const out = { scenario_description: description, rounds: ctx.opts.parallelRounds, modes: {} };
  try {
    for (const mode of await modesOf(ctx, daemons)) {
      const got = { serial: [], parallel: [] };
      pair(ctx, mode, 'serial'); // warm-up (page cache, the daemon's first call)
      for (let round = 0; round < ctx.opts.parallelRounds; round++) {
        const orders = round % 2 ? ['parallel', 'serial'] : ['serial', 'parallel'];
        for (const order of orders) got[order].push(pair(ctx, mode, order));
        say(
          `parallel ${mode.name} round ${round + 1}: serial ADD ${r2(got.serial.at(-1).add)} ms, parallel ADD ${r2(got.parallel.at(-1).add)} ms`,
        );
      }
      const figures = (runs) => ({
        add: stats(runs.map((r) => r.add)),
        del: stats(runs.map((r) => r.del)),
        most_at_once: { add: Math.max(...runs.map((r) => r.most.add)), del: Math.max(...runs.map((r) => r.most.del)) },
      });
      const serial = figures(got.serial);
      const parallel = figures(got.parallel);
      out.modes[mode.name] = {
        what: mode.what,
        serial,
        parallel,
        speedup: {
          add: r2(serial.add.median_ms / parallel.add.median_ms),
          del: r2(serial.del.median_ms / parallel.del.median_ms),
        },
        same_results: [...got.serial, ...got.parallel].every((r) => r.result === got.serial[0].result),
      };
    }
  } finally {
    for (const d of daemons) await d.stop().catch(() => {});
  }
  out.machine_load_1m = { start: load0, end: r2(loadavg()[0]) };
  return out;
}
