/**
 * podresources.ts: the kubelet pod-resources API client, `v1.PodResourcesLister/List` over its unix socket (I/O).
 *
 * One unary gRPC call needs neither a gRPC library nor protobuf runtime: HTTP/2 from `node:http2` (a builtin,
 * loaded on first use), a 5-byte length-prefixed frame, and a decoder for the four messages we read. So
 * nothing is added to the executable or its start-up; devices.ts loads this module with `import()` only when
 * the kubelet socket exists (docs/behaviour.md#device-ids). Like Go Multus: a dial timeout and a call timeout of 10 s
 * each, and a 16 MiB limit on the response. Fields this decoder does not know (cpu_ids, memory, topology,
 * dynamic_resources, ...) are skipped by wire type, as protobuf requires. test/unit/devices/podresources.test.ts
 * checks it against @grpc/grpc-js serving the real proto messages.
 */
import type { ClientHttp2Session, ClientHttp2Stream, IncomingHttpHeaders } from 'node:http2';
import { CniCode, CniError, messageOf } from '../base/errors.ts';

export interface ContainerDevices {
  resourceName: string;
  deviceIds: string[];
}

export interface ContainerResources {
  name: string;
  devices: ContainerDevices[];
}

export interface PodResources {
  name: string;
  namespace: string;
  containers: ContainerResources[];
}

/** `v1.ListPodResourcesResponse`, only the fields Multus reads. */
export interface ListPodResourcesResponse {
  podResources: PodResources[];
}

export interface ListOptions {
  socketPath: string;
  /** Until the kubelet's HTTP/2 SETTINGS arrive. */
  dialTimeoutMs: number;
  /** From sending the request to the end of the response. */
  callTimeoutMs: number;
  /** The largest response message accepted (Go Multus: 16 MiB). */
  maxMessageBytes: number;
}

export const LIST_METHOD_PATH = '/v1.PodResourcesLister/List';

// ---------------------------------------------------------------------------------------------------------------
// Protobuf wire format (https://protobuf.dev/programming-guides/encoding/): only what the messages above need.

const WIRE_VARINT = 0;
const WIRE_I64 = 1;
const WIRE_LEN = 2;
const WIRE_I32 = 5;

function malformed(what: string, problem: string): CniError {
  return new CniError(CniCode.DecodingFailure, `malformed ${what} from the kubelet: ${problem}`);
}

/** A varint as a JS number: exact up to 2^53, which covers every tag and length this decoder accepts. */
function readVarint(buf: Uint8Array, pos: number, what: string): [value: number, next: number] {
  let value = 0;
  for (let i = 0; i < 10; i++) {
    const byte = buf[pos + i];
    if (byte === undefined) throw malformed(what, 'truncated varint');
    value += (byte & 0x7f) * 2 ** (7 * i);
    if ((byte & 0x80) === 0) return [value, pos + i + 1];
  }
  throw malformed(what, 'varint longer than 10 bytes');
}

/** Where the field after a value of `wireType` at `pos` starts. */
function skipValue(buf: Uint8Array, pos: number, wireType: number, field: number, what: string): number {
  let next: number;
  if (wireType === WIRE_VARINT) next = readVarint(buf, pos, what)[1];
  else if (wireType === WIRE_I64) next = pos + 8;
  else if (wireType === WIRE_I32) next = pos + 4;
  else if (wireType === WIRE_LEN) {
    const [length, start] = readVarint(buf, pos, what);
    next = start + length;
  } else throw malformed(what, `field ${field} has unsupported wire type ${wireType}`);
  if (next > buf.length) throw malformed(what, `field ${field} runs past the end of the message`);
  return next;
}

/** Handlers of length-delimited fields, given the field's value as `buf[start, end)`. */
type LenHandlers = Record<number, (buf: Buffer, start: number, end: number) => void>;

/** Calls the handler of each length-delimited field it knows, in wire order; skips every other field. */
function forEachField(buf: Buffer, what: string, handlers: LenHandlers): void {
  let pos = 0;
  while (pos < buf.length) {
    const [tag, valueAt] = readVarint(buf, pos, what);
    const field = Math.floor(tag / 8);
    const wireType = tag % 8;
    if (field === 0) throw malformed(what, 'field number 0');
    const handler = handlers[field];
    if (handler === undefined) {
      pos = skipValue(buf, valueAt, wireType, field, what);
      continue;
    }
    if (wireType !== WIRE_LEN) throw malformed(what, `field ${field} has wire type ${wireType}, expected ${WIRE_LEN}`);
    const [length, start] = readVarint(buf, valueAt, what);
    pos = start + length;
    if (pos > buf.length) throw malformed(what, `field ${field} runs past the end of the message`);
    handler(buf, start, pos);
  }
}

/** proto3 strings must be UTF-8 (grpc-go refuses others). Device IDs are short ASCII: checked inline. */
function decodeString(buf: Buffer, start: number, end: number, what: string): string {
  let ascii = true;
  for (let i = start; i < end && ascii; i++) ascii = (buf[i] ?? 0) < 0x80;
  if (!ascii && !process.getBuiltinModule('node:buffer').isUtf8(buf.subarray(start, end)))
    throw malformed(what, 'string is not valid UTF-8');
  return buf.toString(ascii ? 'latin1' : 'utf8', start, end);
}

function decodeContainerDevices(buf: Buffer): ContainerDevices {
  const what = 'ContainerDevices';
  const out: ContainerDevices = { resourceName: '', deviceIds: [] };
  forEachField(buf, what, {
    1: (b, s, e) => (out.resourceName = decodeString(b, s, e, `${what}.resource_name`)),
    2: (b, s, e) => out.deviceIds.push(decodeString(b, s, e, `${what}.device_ids`)),
  });
  return out;
}

function decodeContainerResources(buf: Buffer): ContainerResources {
  const what = 'ContainerResources';
  const out: ContainerResources = { name: '', devices: [] };
  forEachField(buf, what, {
    1: (b, s, e) => (out.name = decodeString(b, s, e, `${what}.name`)),
    2: (b, s, e) => out.devices.push(decodeContainerDevices(b.subarray(s, e))),
  });
  return out;
}

function decodePodResources(buf: Buffer): PodResources {
  const what = 'PodResources';
  const out: PodResources = { name: '', namespace: '', containers: [] };
  forEachField(buf, what, {
    1: (b, s, e) => (out.name = decodeString(b, s, e, `${what}.name`)),
    2: (b, s, e) => (out.namespace = decodeString(b, s, e, `${what}.namespace`)),
    3: (b, s, e) => out.containers.push(decodeContainerResources(b.subarray(s, e))),
  });
  return out;
}

/** Decodes a serialized `v1.ListPodResourcesResponse` (pure). Throws CniError(DecodingFailure) on garbage. */
export function decodeListPodResourcesResponse(bytes: Uint8Array): ListPodResourcesResponse {
  const buf = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out: ListPodResourcesResponse = { podResources: [] };
  forEachField(buf, 'ListPodResourcesResponse', {
    1: (b, s, e) => out.podResources.push(decodePodResources(b.subarray(s, e))),
  });
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// gRPC over HTTP/2 (https://github.com/grpc/grpc/blob/master/doc/PROTOCOL-HTTP2.md): one unary call.

const GRPC_STATUS_NAMES = [
  'OK',
  'CANCELLED',
  'UNKNOWN',
  'INVALID_ARGUMENT',
  'DEADLINE_EXCEEDED',
  'NOT_FOUND',
  'ALREADY_EXISTS',
  'PERMISSION_DENIED',
  'RESOURCE_EXHAUSTED',
  'FAILED_PRECONDITION',
  'ABORTED',
  'OUT_OF_RANGE',
  'UNIMPLEMENTED',
  'INTERNAL',
  'UNAVAILABLE',
  'DATA_LOSS',
  'UNAUTHENTICATED',
];
/** Statuses a retry may clear: the kubelet restarting, slow, or rate-limiting pod-resources calls. */
const TRANSIENT_STATUSES = new Set(['UNAVAILABLE', 'DEADLINE_EXCEEDED', 'RESOURCE_EXHAUSTED']);

function grpcStatusError(status: number, message: string): CniError {
  const name = GRPC_STATUS_NAMES[status] ?? `status ${status}`;
  const code = TRANSIENT_STATUSES.has(name) ? CniCode.TryAgainLater : CniCode.IoFailure;
  return new CniError(code, `List failed with ${name}${message ? `: ${message}` : ''}`);
}

/** `p`, or a CniError(TryAgainLater) after `ms`, running `onTimeout` first. */
function withTimeout<T>(p: Promise<T>, ms: number, what: string, onTimeout: () => void): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      onTimeout();
      reject(new CniError(CniCode.TryAgainLater, `${what} timed out after ${ms} ms`));
    }, ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

/** Connected means the server's SETTINGS frame arrived (grpc-go's "ready"), not just the socket. */
function dial(socketPath: string, timeoutMs: number): Promise<ClientHttp2Session> {
  const http2 = process.getBuiltinModule('node:http2');
  const net = process.getBuiltinModule('node:net');
  const session = http2.connect('http://localhost', { createConnection: () => net.connect(socketPath) });
  const ready = new Promise<ClientHttp2Session>((resolve, reject) => {
    session.once('remoteSettings', () => resolve(session));
    session.once('error', (err) =>
      reject(new CniError(CniCode.TryAgainLater, `cannot connect: ${messageOf(err)}`, { cause: err })),
    );
    session.once('close', () =>
      reject(new CniError(CniCode.TryAgainLater, 'the connection closed before HTTP/2 was set up')),
    );
  });
  session.on('error', () => {}); // reported through `ready` or the call; never an uncaught 'error' event
  return withTimeout(ready, timeoutMs, `connecting to ${socketPath}`, () => session.destroy()).catch((err: unknown) => {
    session.destroy();
    throw err;
  });
}

interface RawResponse {
  headers: IncomingHttpHeaders;
  trailers: IncomingHttpHeaders;
  body: Buffer;
}

function headerValue(h: IncomingHttpHeaders, name: string): string | undefined {
  const v = h[name];
  return Array.isArray(v) ? v[0] : v;
}

/** Collects one response, failing as soon as the declared message length is over the limit. */
function collect(stream: ClientHttp2Stream, maxMessageBytes: number): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const raw: RawResponse = { headers: {}, trailers: {}, body: Buffer.alloc(0) };
    const chunks: Buffer[] = [];
    let size = 0;
    let declared: number | undefined;
    stream.on('response', (headers) => (raw.headers = headers));
    stream.on('trailers', (trailers) => (raw.trailers = trailers));
    stream.on('data', (chunk: Buffer) => {
      chunks.push(chunk);
      size += chunk.length;
      if (declared === undefined && size >= 5) declared = Buffer.concat(chunks).readUInt32BE(1);
      if ((declared ?? 0) > maxMessageBytes || size > maxMessageBytes + 5) {
        stream.destroy();
        reject(new CniError(CniCode.IoFailure, `the response is larger than the ${maxMessageBytes}-byte limit`));
      }
    });
    stream.on('error', (err) =>
      reject(new CniError(CniCode.TryAgainLater, `the call failed: ${messageOf(err)}`, { cause: err })),
    );
    stream.on('end', () => resolve({ ...raw, body: Buffer.concat(chunks) }));
    // After 'end' this is a no-op; before it, the stream was reset or the connection dropped.
    stream.on('close', () =>
      reject(new CniError(CniCode.TryAgainLater, 'the connection closed before the response ended')),
    );
  });
}

/** The one message of a unary response, after the HTTP and gRPC statuses say it is there. */
function unaryMessage(raw: RawResponse): Buffer {
  const httpStatus = Number(headerValue(raw.headers, ':status'));
  const grpcStatus = headerValue(raw.trailers, 'grpc-status') ?? headerValue(raw.headers, 'grpc-status');
  if (grpcStatus === undefined) {
    const problem = httpStatus === 200 ? 'no grpc-status in the response' : `HTTP status ${httpStatus}`;
    throw new CniError(CniCode.IoFailure, `List failed: ${problem}`);
  }
  if (grpcStatus !== '0') {
    const message = headerValue(raw.trailers, 'grpc-message') ?? headerValue(raw.headers, 'grpc-message') ?? '';
    throw grpcStatusError(Number(grpcStatus), decodeGrpcMessage(message));
  }
  const body = raw.body;
  if (body.length < 5) throw malformed('List response', 'no message in a successful response');
  if (body[0] !== 0) throw malformed('List response', 'the message is compressed, which was not negotiated');
  if (body.length !== 5 + body.readUInt32BE(1))
    throw malformed('List response', 'the message length does not match the data');
  return body.subarray(5);
}

function decodeGrpcMessage(message: string): string {
  try {
    return decodeURIComponent(message);
  } catch {
    return message;
  }
}

function call(session: ClientHttp2Session, opts: ListOptions): Promise<Buffer> {
  let stream: ClientHttp2Stream;
  try {
    stream = request(session, opts.callTimeoutMs);
  } catch (err) {
    // e.g. the kubelet sent GOAWAY right after its SETTINGS
    return Promise.reject(
      new CniError(CniCode.TryAgainLater, `cannot start the call: ${messageOf(err)}`, { cause: err }),
    );
  }
  stream.end(Buffer.alloc(5)); // ListPodResourcesRequest{} is empty: flag 0, length 0
  const response = collect(stream, opts.maxMessageBytes).then(unaryMessage);
  return withTimeout(response, opts.callTimeoutMs, 'List', () => stream.destroy());
}

function request(session: ClientHttp2Session, callTimeoutMs: number): ClientHttp2Stream {
  return session.request({
    ':method': 'POST',
    ':path': LIST_METHOD_PATH,
    'content-type': 'application/grpc',
    te: 'trailers',
    'grpc-timeout': `${Math.max(1, Math.ceil(callTimeoutMs))}m`,
    'grpc-accept-encoding': 'identity',
    'user-agent': 'multus-ts',
  });
}

/**
 * `v1.PodResourcesLister/List` on the kubelet socket. Errors are CniError: TryAgainLater for what a retry may
 * clear (cannot connect, timeouts, UNAVAILABLE), DecodingFailure for a malformed response, IoFailure otherwise.
 */
export async function listPodResources(opts: ListOptions): Promise<ListPodResourcesResponse> {
  const session = await dial(opts.socketPath, opts.dialTimeoutMs);
  try {
    return decodeListPodResourcesResponse(await call(session, opts));
  } finally {
    session.destroy();
  }
}
