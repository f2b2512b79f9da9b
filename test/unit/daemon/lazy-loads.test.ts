/**
 * What the daemon evaluates when it starts (docs/resident.md, "Memory"): prom-client (only with metricsPort),
 * dynamic networks, hot-plug's /delegate, the DRA plugin and its gRPC (only with draNetworks), the operator commands and `multus install` are loaded by `import()`
 * when first used, never by a static import reachable from the daemon's entry (src/roles.ts). The bundler keeps a
 * module reached only through `import()` unevaluated until that call, so a static import added anywhere on the
 * way brings the module's memory back into every daemon; this test follows the static imports and fails then.
 */
import { readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const SRC = resolve('src');

// a static import or re-export (not `import type`, not `import()`), its specifier
const STATIC = /^\s*(?:import|export)\s+(?!type\b)(?:[^'";]*?\bfrom\s*)?['"]([^'"]+)['"]/gm;

/** Every module (src-relative path, or package name) reached from `entry` through static imports only. */
function staticClosure(entry: string): Set<string> {
  const seen = new Set<string>();
  const todo = [join(SRC, entry)];
  while (todo.length) {
    const file = todo.pop()!;
    const rel = relative(SRC, file);
    if (seen.has(rel)) continue;
    seen.add(rel);
    for (const [, spec] of readFileSync(file, 'utf8').matchAll(STATIC)) {
      if (spec!.startsWith('.')) todo.push(resolve(dirname(file), spec!));
      else if (!spec!.startsWith('node:')) seen.add(spec!);
    }
  }
  return seen;
}

describe("the daemon's start-up loads only what every daemon uses", () => {
  const closure = staticClosure('roles.ts');

  it('reaches the daemon itself (the walk follows imports)', () => {
    expect(closure).toContain('daemon/main.ts');
    expect(closure).toContain('daemon/server.ts');
    expect(closure).toContain('informers/informers.ts');
  });

  it('does not reach prom-client, dynamic networks, /delegate, the DRA plugin, the gRPC library, the operator commands or install', () => {
    const lazy = [...closure].filter(
      (m) =>
        m === 'prom-client' ||
        m === 'daemon/metrics.ts' ||
        m === 'daemon/delegate-http.ts' ||
        m.startsWith('hotplug/') ||
        m.startsWith('dra/') || // the DRA plugin, only with draNetworks (daemon/dra-part.ts)
        (m.startsWith('kubelet/') && m !== 'kubelet/load.ts') || // load.ts: the loader alone
        m.startsWith('@grpc/') ||
        m.startsWith('operator/') ||
        m.startsWith('install/'),
    );
    expect(lazy).toEqual([]);
  });

  it("does not reach @kubernetes/client-node's modules (the informers load them when Kubernetes is configured)", () => {
    expect([...closure].filter((m) => m.startsWith('@kubernetes/'))).toEqual([]);
  });
});
