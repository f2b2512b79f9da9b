/**
 * daemon/http-guard.ts: what the daemon's HTTP server does with connections that never make a request (I/O).
 *
 * Bun's node:http does not end a connection whose request body trickles in one byte at a time (requestTimeout is not
 * honoured; a trickling header it ends after 10-15 s), and a request it cannot parse was closed without an answer.
 * So: a connection that has not sent its whole request (head and body) within REQUEST_DEADLINE_MS is destroyed,
 * whatever it sends meanwhile (the shim sends its request at once); a request that cannot be parsed is answered
 * 431 (its header is over the limit) or 400 before the connection is closed (docs/archive/resident-protocol.md).
 */
import type { Server } from 'node:http';
import type { Socket } from 'node:net';

/** How long a connection may take to send its whole request (the shim sends it at once). */
export const REQUEST_DEADLINE_MS = 10_000;

export function guardConnections(server: Server, deadlineMs = REQUEST_DEADLINE_MS): void {
  const requested = new WeakSet<object>();
  // read to its end by the handler (every path reads or resumes the body): the call may then run as long as it needs
  server.on('request', (req) => req.once('end', () => requested.add(req.socket)));
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
