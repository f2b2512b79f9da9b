/**
 * daemon/http-guard.ts: what the daemon's HTTP server does with connections that never make a request (I/O).
 *
 * Bun's node:http does not end a connection whose header trickles in one byte at a time (headersTimeout is not
 * honoured), and a request it cannot parse was closed without an answer. So: a connection that has not sent a
 * whole request head within HEADER_DEADLINE_MS is destroyed, whatever it sends meanwhile; a request that cannot be
 * parsed is answered 431 (its header is over the limit) or 400 before the connection is closed
 * (docs/resident-protocol.md).
 */
import type { Server } from 'node:http';
import type { Socket } from 'node:net';

/** How long a connection may take to send its request line and headers (the shim sends them at once). */
export const HEADER_DEADLINE_MS = 10_000;

export function guardConnections(server: Server, deadlineMs = HEADER_DEADLINE_MS): void {
  const requested = new WeakSet<object>();
  server.on('request', (req) => requested.add(req.socket));
  server.on('connection', (socket: Socket) => {
    const timer = setTimeout(() => {
      if (!requested.has(socket)) socket.destroy();
    }, deadlineMs);
    timer.unref();
    socket.once('close', () => clearTimeout(timer));
  });
  server.on('clientError', (e: NodeJS.ErrnoException, socket) => {
    const status = e.code === 'HPE_HEADER_OVERFLOW' ? '431 Request Header Fields Too Large' : '400 Bad Request';
    const body = JSON.stringify({ code: 4, msg: `the daemon could not parse the request: ${e.code ?? e.message}` });
    try {
      socket.end(
        `HTTP/1.1 ${status}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
          `Connection: close\r\n\r\n${body}`,
      );
    } catch {
      socket.destroy();
    }
  });
}
