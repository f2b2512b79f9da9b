/**
 * daemon/components.ts: components start in order under one cancel signal, stop in reverse once it is aborted,
 * and a failed start stops what had started (reverse order, nothing to drain) before it throws.
 */
import { describe, expect, it } from 'vitest';
import type { Component, Stopping } from '../../../src/daemon/components.ts';
import { notReadyOf, startComponents } from '../../../src/daemon/components.ts';

function recorder(events: string[]) {
  const signals: AbortSignal[] = [];
  const part = (name: string, o: { fails?: boolean; notReady?: string } = {}): Component => ({
    name,
    start(signal) {
      signals.push(signal);
      if (o.fails) throw new Error(`${name} cannot start`);
      events.push(`start ${name}`);
    },
    notReady: () => o.notReady,
    async stop(how: Stopping | undefined) {
      await Promise.resolve();
      events.push(`stop ${name}${how ? ` (${how.reason}, aborted ${signals[0]!.aborted})` : ''}`);
    },
  });
  return { part, signals };
}

describe('startComponents', () => {
  it('starts in order, stops in reverse once the one signal is aborted', async () => {
    const events: string[] = [];
    const { part, signals } = recorder(events);
    const daemon = new AbortController();
    const running = await startComponents([part('a'), part('b'), part('c')], daemon);
    expect(new Set(signals).size, 'every component gets the one signal').toBe(1);
    expect(signals[0]!.aborted).toBe(false);
    await running.stop({ reason: 'SIGTERM', again: new Promise(() => {}) });
    expect(events).toEqual([
      'start a',
      'start b',
      'start c',
      'stop c (SIGTERM, aborted true)',
      'stop b (SIGTERM, aborted true)',
      'stop a (SIGTERM, aborted true)',
    ]);
  });

  it('a failed start stops the started ones in reverse, with nothing to drain, and throws', async () => {
    const events: string[] = [];
    const { part } = recorder(events);
    const daemon = new AbortController();
    const list = [part('a'), part('b'), part('c', { fails: true }), part('d')];
    await expect(startComponents(list, daemon)).rejects.toThrow('c cannot start');
    expect(events).toEqual(['start a', 'start b', 'stop b', 'stop a']);
    expect(daemon.signal.aborted).toBe(true);
  });

  it('not ready: the first reason in start order', () => {
    const { part } = recorder([]);
    expect(notReadyOf([part('a'), part('b', { notReady: 'b waits' }), part('c', { notReady: 'c waits' })])).toBe(
      'b waits',
    );
    expect(notReadyOf([part('a')])).toBeUndefined();
  });
});
