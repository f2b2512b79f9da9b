/**
 * scripts/plots/data.mjs: the rows docs/performance.md's plots draw, taken from the bench's JSON (pure).
 *
 * A bench file holds one JSON object, or one object per line (`npm run bench` prints a line per run; several runs
 * were kept in one file). Each function takes the parsed objects of the files it is given and returns flat rows
 * for Vega-Lite; a mode the run did not have is left out, never drawn as zero.
 */

/** Our modes and Go Multus' beside them, as the plots name them. */
export const MODE_LABELS = {
  thin_ts: 'multus-ts thin',
  go_thin: 'Go Multus thin',
  resident_ts: 'multus-ts resident',
  go_thick: 'Go Multus thick',
  go_thick_300mi: 'Go Multus thick',
  resident_ts_multus_limits: 'multus-ts resident, 100m / 50Mi',
};

/** The density bench's daemon modes name their resources: only one of them has a CPU limit. */
const DENSITY_LABELS = {
  ...MODE_LABELS,
  resident_ts: 'multus-ts resident, no CPU limit',
  go_thick_300mi: 'Go Multus thick, no CPU limit',
};

const SCENARIOS = { delegates_only: 'delegates only', kubernetes: 'Kubernetes (2 NADs)' };

/** @param {string} text the contents of a bench file @returns {any[]} its objects */
export function parseBench(text) {
  const trimmed = text.trim();
  if (trimmed === '') return [];
  try {
    return [JSON.parse(trimmed)];
  } catch {
    return trimmed
      .split('\n')
      .filter((line) => line.trim().startsWith('{'))
      .map((line) => JSON.parse(line));
  }
}

function implementation(mode) {
  return mode.startsWith('go_') ? 'Go Multus v4.3.0' : 'multus-ts';
}

/**
 * One row per run, scenario and mode of the `resident` scenario's per-call figures: a pod's ADD and DEL together
 * (`overhead_pod`, the plugin's own time, the delegate's subtracted), CPU per ADD, and the peak RSS of the
 * process the runtime starts (the thin plugin, or the shim).
 * @param {any[]} runs
 */
export function callRows(runs) {
  const rows = [];
  runs.forEach((run, i) => {
    for (const [key, scenario] of Object.entries(SCENARIOS)) {
      const modes = run.resident?.[key]?.modes ?? {};
      for (const [mode, m] of Object.entries(modes)) {
        if (!(mode in MODE_LABELS) || m.overhead_pod?.median_ms === undefined) continue;
        rows.push({
          run: i + 1,
          date: run.date,
          scenario,
          mode: MODE_LABELS[mode],
          implementation: implementation(mode),
          overhead_pod_ms: m.overhead_pod.median_ms,
          cpu_add_ms: m.cpu_add_ms,
          peak_rss_mib: m.peak_rss_mib?.median,
        });
      }
    }
  });
  return rows;
}

/**
 * One row per kube-burner run and mode of the `density` scenario: pod-ready p99 (seconds), the daemon
 * container's memory cgroup peak (MiB, modes with a daemon), its limit, and the failed pods.
 * @param {any[]} runs
 */
export function densityRows(runs) {
  const rows = [];
  for (const run of runs) {
    const density = run.density;
    if (density === undefined) continue;
    for (const [mode, m] of Object.entries(density.modes ?? {})) {
      if (!(mode in DENSITY_LABELS)) continue;
      const limit = density.daemon_peak_rss_mib?.[mode]?.limit;
      (m.runs ?? []).forEach((r, i) => {
        if (r?.pod_ready_ms?.p99 === undefined) return;
        rows.push({
          date: run.date,
          day: String(run.date).slice(0, 10),
          run: i + 1,
          mode: DENSITY_LABELS[mode],
          implementation: implementation(mode),
          pod_ready_p99_s: r.pod_ready_ms.p99 / 1000,
          cgroup_peak_mib: r.daemon_cgroup_peak_mib,
          oom_kills: r.daemon_cgroup_oom_kills,
          memory_limit_mib: limit,
          failed_pods: r.failed_pods,
        });
      });
    }
  }
  return rows;
}

/** The machine each run reports: cores, CPU, kernel and its 1-minute load at start and end. @param {any[]} runs */
export function machineRows(runs) {
  return runs
    .filter((run) => run.machine !== undefined)
    .map((run) => ({
      date: run.date,
      scenario: run.scenario,
      git_head: run.git_head,
      cores: run.machine.cores,
      cpu_model: run.machine.cpu_model,
      kernel: run.machine.kernel,
      load_start: run.machine.loadavg_1m_start,
      load_end: run.machine.loadavg_1m_end,
    }));
}
