/**
 * A network namespace for tests that need CNI_NETNS to name one (src/cni/netns.ts refuses a plain file since
 * issue 28) but run no real plugin in it: one per test process, held by a small process of its own
 * (`unshare --net`, or `unshare -rn` without root) that ends when this process does. Nothing is configured in it.
 */
import { spawn } from 'node:child_process';
import { statSync } from 'node:fs';

let held: string | undefined;

function inode(path: string): number | undefined {
  try {
    return statSync(path).ino;
  } catch {
    return undefined;
  }
}

/** `/proc/<holder>/ns/net`, a network namespace other than this process's. */
export function testNetns(): string {
  if (held) return held;
  const own = inode('/proc/self/ns/net');
  const root = process.getuid?.() === 0;
  // the holder polls this process and ends with it (also when a test worker is killed)
  const watch = `while kill -0 ${process.pid} 2>/dev/null; do sleep 1; done`;
  const child = spawn('unshare', [...(root ? ['--net'] : ['-rn']), 'sh', '-c', watch], {
    stdio: 'ignore',
    detached: true,
  });
  child.unref();
  process.once('exit', () => child.kill('SIGKILL'));
  const path = `/proc/${child.pid}/ns/net`;
  const deadline = Date.now() + 5000;
  const pause = new Int32Array(new SharedArrayBuffer(4));
  for (;;) {
    const ino = inode(path);
    if (ino !== undefined && ino !== own) break;
    if (Date.now() > deadline || child.exitCode !== null) {
      throw new Error('cannot make a test network namespace: needs `unshare --net` (root) or user namespaces');
    }
    Atomics.wait(pause, 0, 0, 5);
  }
  held = path;
  return held;
}
