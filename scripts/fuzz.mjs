#!/usr/bin/env node
// npm run fuzz -- [--runs N] [--seed S]: the fuzzing suite (test/fuzz) with more cases or another seed than CI's
// fixed 10,000. A random seed is chosen when none is given and printed, so a failure can be replayed.
import { spawnSync } from 'node:child_process';

const args = process.argv.slice(2);
const opt = (name) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : undefined;
};
const runs = opt('runs') ?? '100000';
const seed = opt('seed') ?? String(Math.floor(Math.random() * 2 ** 31));
if (!/^\d+$/.test(runs) || !/^-?\d+$/.test(seed)) {
  console.error('usage: npm run fuzz -- [--runs N] [--seed S]');
  process.exit(2);
}
console.log(`fuzz: ${runs} runs, seed ${seed} (replay with: npm run fuzz -- --runs ${runs} --seed ${seed})`);
const r = spawnSync('npx', ['vitest', 'run', 'test/fuzz'], {
  stdio: 'inherit',
  env: { ...process.env, FUZZ_RUNS: runs, FUZZ_SEED: seed, ...(args.includes('--stats') ? { FUZZ_STATS: '1' } : {}) },
});
process.exit(r.status ?? 1);
