/**
 * main.ts: the process edges of `multus install` and `multus --is-default-ready`, imported by cli.ts only in
 * those roles. Failures are one line on stderr naming the path and what to do, with exit status 1 (2 for a bad
 * option); SIGTERM and SIGINT stop the installer (exit 0).
 * Tested by test/install/cli.test.ts (the built executable's install roles).
 */
import { setTimeout as delay } from 'node:timers/promises';
import { hostname } from 'node:os';
import { callerEnv, launcherPath } from '../base/caller-env.ts';
import { messageOf } from '../base/errors.ts';
import { formatTimestamp, silentLogger } from '../base/log.ts';
import { realReadinessDeps } from '../multus/readiness.ts';
import { runInstall } from './install.ts';
import { InstallError, type InstallOptions, parseInstallArgs, usage } from './options.ts';
import { isDefaultReady, parseReadyArgs } from './ready.ts';

function fail(prefix: string, e: unknown): number {
  const msg = e instanceof InstallError ? e.message : e instanceof Error ? e.message : String(e);
  process.stderr.write(`${prefix}: ${msg}\n`);
  return 1;
}

/** A Warning event on this node (MULTUS_NODE_NAME, else the host name: the pod is hostNetwork); never throws. */
async function warnNode(w: { kubeconfig: string; reason: string; message: string }): Promise<void> {
  try {
    const [{ loadKubeClient }, { nodeEvent }] = await Promise.all([
      import('../k8s/client.ts'),
      import('../k8s/calls.ts'),
    ]);
    const env = callerEnv(process.env); // the caller's, also behind the launcher (base/caller-env.ts)
    const kube = await loadKubeClient({ kubeconfig: w.kubeconfig, env, log: silentLogger });
    if (!kube) return;
    const node = env.MULTUS_NODE_NAME || hostname();
    try {
      await kube.createEvent(nodeEvent(node, 'Warning', w.reason, w.message));
    } finally {
      kube.close();
    }
  } catch (e) {
    process.stdout.write(`${formatTimestamp(new Date())} event ${w.reason} not recorded: ${messageOf(e)}\n`);
  }
}

export async function installMain(argv: readonly string[]): Promise<number> {
  let opts;
  try {
    opts = parseInstallArgs(argv);
  } catch (e) {
    fail('multus install', e);
    return 2;
  }
  if (opts.help) {
    process.stdout.write(usage());
    return 0;
  }
  return runInstaller(opts, 'multus install');
}

/** Runs the installer with `opts` until SIGTERM/SIGINT; failures are one line on stderr after `prefix`. */
export async function runInstaller(opts: InstallOptions, prefix: string): Promise<number> {
  const stop = new AbortController();
  const onSignal = (): void => stop.abort();
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  try {
    await runInstall(opts, {
      env: callerEnv(process.env),
      // the launcher (build/multus) when it started us: that is the `multus` to install, not the Bun executable
      execPath: launcherPath(process.env) ?? process.execPath,
      log: (line) => process.stdout.write(`${formatTimestamp(new Date())} ${line}\n`), // Multus' stamp (docs/install.md)
      warnNode,
      stopped: () => stop.signal.aborted,
      async sleep(ms) {
        try {
          await delay(ms, undefined, { signal: stop.signal });
        } catch {}
        return stop.signal.aborted;
      },
    });
    return 0;
  } catch (e) {
    return fail(prefix, e);
  } finally {
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
  }
}

export async function readyMain(argv: readonly string[]): Promise<number> {
  try {
    const answer = await isDefaultReady(parseReadyArgs(argv), realReadinessDeps);
    (answer.ready ? process.stdout : process.stderr).write(answer.line + '\n');
    return answer.ready ? 0 : 1;
  } catch (e) {
    fail('multus --is-default-ready', e);
    return 2;
  }
}
