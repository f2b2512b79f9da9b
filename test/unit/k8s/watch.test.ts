/**
 * A watch's body read as it comes (src/k8s/watch.ts pump): events split across chunks and several in one chunk,
 * the end of the stream, a broken stream, a line that is not JSON, a silent stream taken as dead, the abort.
 * The transports that feed it (Bun's fetch, node:https) run against a real API server in test/k8s/warm.test.ts
 * (Node) and the cluster bench (Bun).
 */
import { describe, expect, it } from 'vitest';
import { type OpenStream, pump, streamCall } from '../../../src/k8s/watch.ts';

/** A stream that yields `chunks` (an Error is thrown in its place), then ends, or stays open when `hang`. */
function stream(chunks: (string | Error)[], hang = false): OpenStream & { cancelled: boolean } {
  const enc = new TextEncoder();
  const s = {
    status: 200,
    cancelled: false,
    read: async () => {
      const c = chunks.shift();
      if (c instanceof Error) throw c;
      if (c !== undefined) return enc.encode(c);
      if (hang) await new Promise(() => {});
      return undefined;
    },
    cancel: () => {
      s.cancelled = true;
    },
  };
  return s;
}

function watch(s: OpenStream, idleMs?: number) {
  const events: string[] = [];
  let resolveDone!: (err: unknown) => void;
  const done = new Promise<unknown>((r) => (resolveDone = r));
  const abort = pump(
    s,
    {
      event: (type, obj) => events.push(`${type} ${(obj as { metadata?: { name?: string } })?.metadata?.name}`),
      done: (err) => resolveDone(err ?? 'ended'),
    },
    idleMs,
  );
  return { events, done, abort };
}

const line = (type: string, name: string) => JSON.stringify({ type, object: { metadata: { name } } }) + '\n';

describe('pump: a watch body, line by line', () => {
  it('hands each event over, whole lines only, across chunks; done() at the end', async () => {
    const a = line('ADDED', 'a');
    const s = stream([
      a.slice(0, 10),
      a.slice(10) + line('MODIFIED', 'a'),
      line('DELETED', 'a').slice(0, 5),
      line('DELETED', 'a').slice(5),
    ]);
    const w = watch(s);
    expect(await w.done).toBe('ended');
    expect(w.events).toEqual(['ADDED a', 'MODIFIED a', 'DELETED a']);
  });

  it('a broken stream and a line that is not JSON end it with the error', async () => {
    const broken = watch(stream([line('ADDED', 'a'), new Error('ECONNRESET')]));
    expect(String(await broken.done)).toContain('ECONNRESET');
    expect(broken.events).toEqual(['ADDED a']);
    const garbage = watch(stream(['{"type":\n']));
    expect(await garbage.done).toBeInstanceOf(SyntaxError);
  });

  it('a stream silent for the idle limit is ended with an error and cancelled', async () => {
    const s = stream([line('ADDED', 'a')], true);
    const w = watch(s, 50);
    expect(String(await w.done)).toContain('silent');
    expect(s.cancelled).toBe(true);
  });

  it('the abort cancels the stream and calls no done', async () => {
    const s = stream([], true);
    let ended = false;
    const abort = pump(s, { event: () => {}, done: () => (ended = true) }, 60_000);
    abort();
    await new Promise((r) => setTimeout(r, 20));
    expect(s.cancelled).toBe(true);
    expect(ended).toBe(false);
  });

  it("names the watch's field selector in its errors", () => {
    expect(streamCall('pods', '/api/v1/pods?watch=true&fieldSelector=spec.nodeName%3Dn1').name).toBe(
      'spec.nodeName=n1',
    );
  });
});
