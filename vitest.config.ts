import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 300_000,
    // End-to-end files create network namespaces and bridges with unique names, so they may run in parallel,
    // but two cores are all CI has: keep the worker count small.
    maxWorkers: 2,
  },
});
