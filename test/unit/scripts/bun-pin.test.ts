/**
 * The build compiles with the Bun that package.json pins and no other (scripts/build-steps/compile.mjs `sameBuild`):
 * the npm version of `@oven/bun-linux-x64` names a release, or a canary and its commit, and the binary's
 * `--revision` must name that build.
 */
import { describe, expect, it } from 'vitest';
// @ts-expect-error: a build step in plain JavaScript, without declarations
import { sameBuild } from '../../../scripts/build-steps/compile.mjs';

describe('sameBuild', () => {
  it.each([
    ['a release and its revision', '1.4.5', '1.4.5+a7733435c', true],
    ['a release and another release', '1.4.5', '1.4.4+0d9b296af', false],
    ['a release and a canary of the next', '1.4.5', '1.4.6-canary.1+c24943ad0', false],
    ['a canary and its commit', '1.4.5-canary.20261202.1+c24943a', '1.4.6-canary.1+c24943ad0', true],
    ['a canary and another commit', '1.4.5-canary.20261202.1+c24943a', '1.4.6-canary.1+0d9b296af', false],
    ['a canary and the release', '1.4.5-canary.20261202.1+c24943a', '1.4.5+a7733435c', false],
    ['no revision printed', '1.4.5', '', false],
    ['a revision without a commit', '1.4.5', '1.4.5', false],
  ])('%s', (_what, pinned, revision, same) => {
    expect(sameBuild(pinned, revision)).toBe(same);
  });
});
