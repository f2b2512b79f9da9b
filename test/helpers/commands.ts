/** Calls a command the way handle() does: the call context first (host/prepare.ts builds it), then the command. */
import { silentLogger } from '../../src/base/log.ts';
import { doorInputOf } from '../../src/host/handle.ts';
import type { Exec } from '../../src/cni/exec.ts';
import type { CniRequest } from '../../src/cni/request.ts';
import type { KubeClient } from '../../src/k8s/types.ts';
import type { Logger } from '../../src/base/log.ts';
import type { Env } from '../../src/cni/request.ts';
import type { CallContext, Seams } from '../../src/multus/call-context.ts';
import { callContext } from '../../src/multus/call-context.ts';
import type { MultusConf } from '../../src/multus/conf.ts';

/** A command's seams, with what a door would add: the call's logger and the environment delegates inherit. */
export interface TestSeams extends Seams {
  log: Logger;
  env: Env;
}

export function withContext(req: CniRequest, conf: MultusConf, deps: TestSeams): [CallContext] {
  return [callContext(doorInputOf(req, conf, deps.env), deps, deps.log)];
}

/** A command's deps with Kubernetes: `exec` and `kube` given, readiness always met, a real clock, no log. */
export function kubeDeps(exec: Exec, kube: KubeClient): TestSeams {
  return { ...localDeps(exec), kube: async () => kube, clock: { now: () => Date.now(), sleep: async () => {} } };
}

/** A command's deps without Kubernetes: `exec` given, readiness always met, the clock at 0, no log. */
export function localDeps(exec: Exec): TestSeams {
  return {
    exec,
    log: silentLogger,
    readiness: { exists: async () => true, sleep: async () => {} },
    env: {},
    kube: async () => undefined,
    clock: { now: () => 0, sleep: async () => {} },
  };
}
