/**
 * start-bytes' counting relay (scripts/bench/cluster/start-bytes.ts): a TCP relay in front of the API server that
 * counts each connection's bytes both ways, and its TLS records by content type.
 */
import { type Server, type Socket, connect, createServer } from 'node:net';

interface Conn {
  id: number;
  up: number;
  down: number;
  /** Bytes of TLS records by content type, down (22 handshake, 20 change cipher spec, 23 data, 21 alert). */
  downByType: Record<number, number>;
  upByType: Record<number, number>;
}

/** Sums a direction's TLS records by content type (header: type, version, 2-byte length). */
function recordCounter(into: Record<number, number>): (b: Buffer) => void {
  let pending = Buffer.alloc(0);
  let skip = 0;
  let type = 0;
  return (b) => {
    let buf = pending.length ? Buffer.concat([pending, b]) : b;
    pending = Buffer.alloc(0);
    while (buf.length) {
      if (skip) {
        const n = Math.min(skip, buf.length);
        into[type] = (into[type] ?? 0) + n;
        skip -= n;
        buf = buf.subarray(n);
        continue;
      }
      if (buf.length < 5) {
        pending = Buffer.from(buf);
        return;
      }
      type = buf[0]!;
      skip = 5 + buf.readUInt16BE(3);
    }
  };
}

export class Relay {
  conns: Conn[] = [];
  private server: Server | undefined;
  private readonly sockets = new Set<Socket>();
  port = 0;
  private readonly target: number;

  constructor(target: number) {
    this.target = target;
  }

  async open(): Promise<void> {
    this.server = createServer((down) => {
      const c: Conn = { id: this.conns.length, up: 0, down: 0, downByType: {}, upByType: {} };
      this.conns.push(c);
      const up = connect(this.target, '127.0.0.1');
      this.sockets.add(down).add(up);
      const countUp = recordCounter(c.upByType);
      const countDown = recordCounter(c.downByType);
      down.on('data', (b: Buffer) => ((c.up += b.length), countUp(b)));
      up.on('data', (b: Buffer) => ((c.down += b.length), countDown(b)));
      down.pipe(up);
      up.pipe(down);
      up.on('error', () => down.destroy());
      down.on('error', () => up.destroy());
      down.on('close', () => (this.sockets.delete(down), up.destroy()));
      up.on('close', () => (this.sockets.delete(up), down.destroy()));
    });
    await new Promise<void>((r) => this.server!.listen(0, '127.0.0.1', () => r()));
    this.port = (this.server.address() as { port: number }).port;
  }

  /** The connections opened from now on. */
  mark(): number {
    return this.conns.length;
  }

  since(mark: number): Conn[] {
    return this.conns.slice(mark);
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise((r) => this.server?.close(r));
  }
}

const total = (cs: Conn[]) => cs.reduce((a, c) => ({ up: a.up + c.up, down: a.down + c.down }), { up: 0, down: 0 });
export const summary = (cs: Conn[]) => ({
  connections: cs.length,
  ...total(cs),
  bytes: total(cs).up + total(cs).down,
  each: cs.map((c) => ({ up: c.up, down: c.down, down_tls_types: c.downByType })),
});
