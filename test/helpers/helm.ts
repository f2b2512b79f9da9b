/**
 * helm v3.22.0 as the tests run it (test/peers/build-go-tool.sh helm builds it into the cache) and the chart's path:
 * a HOME and XDG dirs of its own, so no repository or cache of the machine's is read.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const REPO = join(import.meta.dirname, '..', '..');
export const HELM = join(process.env.MULTUS_TS_CACHE_DIR || join(REPO, '.cache'), 'helm', 'helm');
export const CHART = join(REPO, 'deployments', 'helm', 'multus');

/** The environment of one helm run: PATH and a fresh HOME. */
export function helmEnv(): Record<string, string> {
  const home = mkdtempSync(join(tmpdir(), 'mts-helm-home-'));
  return { PATH: '/usr/bin:/bin', HOME: home, XDG_CACHE_HOME: join(home, 'cache'), XDG_CONFIG_HOME: join(home, 'cfg') };
}
