/** Runs `kubectl multus` in-process with captured output (for the operator tests). */
import { runKubectlMultus } from '../../../src/operator/kubectl-multus.ts';

export interface KubectlRun {
  code: number;
  stdout: string;
  stderr: string;
}

export async function kubectlMultus(
  argv: string[],
  stdin = '',
  env: Record<string, string | undefined> = {},
): Promise<KubectlRun> {
  let stdout = '';
  let stderr = '';
  const io = { stdout: (s: string) => void (stdout += s), stderr: (s: string) => void (stderr += s) };
  const code = await runKubectlMultus(argv, { io, env, stdin: () => stdin });
  return { code, stdout, stderr };
}
