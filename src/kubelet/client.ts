/**
 * client.ts: one unary gRPC call to a kubelet unix socket (I/O), every failure a CniError that says what to do:
 * TryAgainLater for what a retry may clear (cannot connect, a timeout, UNAVAILABLE, DEADLINE_EXCEEDED,
 * RESOURCE_EXHAUSTED from the server, a cancelled call), DecodingFailure for a response that is not the message
 * the .proto declares, IoFailure otherwise. Like Go Multus' pod-resources client: a dial timeout (until the
 * connection is ready, HTTP/2 set up), a call timeout sent as the gRPC deadline, a limit on the response size,
 * and a fresh connection per call, closed after it.
 */
import { CniCode, CniError, messageOf } from '../base/errors.ts';
import { grpc } from './grpc.ts';
import type { MethodDefinition, ServiceDefinition } from './grpc.ts';

export interface UnaryOptions {
  socketPath: string;
  /** Until the connection is ready (the server's HTTP/2 SETTINGS arrived). */
  dialTimeoutMs: number;
  /** From sending the request to the end of the response; sent to the server as the deadline. */
  callTimeoutMs: number;
  /** The largest response message accepted. */
  maxMessageBytes: number;
  /** Cancels the call (a shutdown or the caller's deadline). */
  signal?: AbortSignal;
}

/** Statuses a retry may clear: the server restarting, slow, or rate-limiting. */
const TRANSIENT = new Set([grpc.status.UNAVAILABLE, grpc.status.DEADLINE_EXCEEDED, grpc.status.RESOURCE_EXHAUSTED]);

function statusError(method: string, code: number, details: string): CniError {
  const name = grpc.status[code] ?? `status ${code}`;
  const cniCode = TRANSIENT.has(code) ? CniCode.TryAgainLater : CniCode.IoFailure;
  return new CniError(cniCode, `${method} failed with ${name}${details ? `: ${details}` : ''}`);
}

/** Resolves once the channel is READY, or has failed (the call then fails at once and says why). */
function connect(channel: ReturnType<grpc.Client['getChannel']>, opts: UnaryOptions): Promise<void> {
  const { READY, TRANSIENT_FAILURE, SHUTDOWN } = grpc.connectivityState;
  const deadline = Date.now() + opts.dialTimeoutMs;
  return new Promise((resolve, reject) => {
    const check = (): void => {
      if (opts.signal?.aborted) return reject(cancelled('connecting'));
      const state = channel.getConnectivityState(true);
      if (state === READY || state === TRANSIENT_FAILURE || state === SHUTDOWN) return resolve();
      channel.watchConnectivityState(state, deadline, (err) => {
        if (!err) return check();
        const what = `connecting to ${opts.socketPath} timed out after ${opts.dialTimeoutMs} ms`;
        reject(new CniError(CniCode.TryAgainLater, what));
      });
    };
    check();
  });
}

function cancelled(what: string): CniError {
  return new CniError(CniCode.TryAgainLater, `${what} was cancelled`);
}

/** grpc-js names the socket's last error inside its UNAVAILABLE text; that error is what a reader needs. */
function connectError(details: string): CniError {
  const last = /Last error: (?:Error: )?(.*?)\. Resolution note/.exec(details)?.[1];
  return new CniError(CniCode.TryAgainLater, `cannot connect: ${last ?? details}`);
}

interface CallState {
  method: string;
  opts: UnaryOptions;
  deadline: number;
  connected: boolean;
  /** Set when our deserializer refused the response: the library reports it as INTERNAL, we as what it is. */
  decodeError?: CniError;
}

function callError(state: CallState, err: grpc.ServiceError): CniError {
  const { method, opts } = state;
  if (state.decodeError) return state.decodeError;
  if (err.code === grpc.status.CANCELLED && opts.signal?.aborted) return cancelled(method);
  if (err.code === grpc.status.DEADLINE_EXCEEDED && Date.now() >= state.deadline)
    return new CniError(CniCode.TryAgainLater, `${method} timed out after ${opts.callTimeoutMs} ms`);
  if (err.code === grpc.status.RESOURCE_EXHAUSTED && err.details.startsWith('Received message larger than max'))
    return new CniError(CniCode.IoFailure, `the response is larger than the ${opts.maxMessageBytes}-byte limit`);
  if (err.code === grpc.status.UNAVAILABLE && !state.connected) return connectError(err.details);
  return statusError(method, err.code, err.details);
}

/**
 * Calls `method` of `service` on the unix socket with `request` and returns the response message (as
 * grpc.ts' loader options shape it). `decode` may narrow it; what it throws becomes a DecodingFailure.
 */
export async function unaryCall<T>(
  service: ServiceDefinition,
  method: string,
  request: object,
  opts: UnaryOptions,
  decode: (message: unknown) => T,
): Promise<T> {
  const definition = service[method];
  if (definition === undefined) throw new Error(`the service has no method ${method}`);
  // grpc.ts' definitions name their response message; grpc-js' type does not say so
  const typeName = (definition as Partial<MethodDefinition>).responseName ?? `${method} response`;
  const client = new grpc.Client(`unix:${opts.socketPath}`, grpc.credentials.createInsecure(), {
    'grpc.max_receive_message_length': opts.maxMessageBytes,
    'grpc.primary_user_agent': 'multus-ts',
    'grpc.enable_retries': 0,
  });
  // a shutdown or the caller's deadline: a call in flight ends CANCELLED; closing the channel wakes a dial
  let call: grpc.ClientUnaryCall | undefined;
  const onAbort = (): void => {
    call?.cancel();
    client.close();
  };
  opts.signal?.addEventListener('abort', onAbort, { once: true });
  try {
    await connect(client.getChannel(), opts);
    const state: CallState = { method, opts, deadline: Date.now() + opts.callTimeoutMs, connected: false };
    state.connected = client.getChannel().getConnectivityState(false) === grpc.connectivityState.READY;
    const deserialize = (bytes: Buffer): T => {
      try {
        return decode(definition.responseDeserialize(bytes));
      } catch (err) {
        state.decodeError =
          err instanceof CniError
            ? err
            : new CniError(CniCode.DecodingFailure, `malformed ${typeName} from the kubelet: ${messageOf(err)}`, {
                cause: err,
              });
        throw err;
      }
    };
    return await new Promise<T>((resolve, reject) => {
      if (opts.signal?.aborted) return reject(cancelled(method));
      call = client.makeUnaryRequest(
        definition.path,
        definition.requestSerialize,
        deserialize,
        request,
        new grpc.Metadata(),
        { deadline: state.deadline },
        (err, value) => (err ? reject(callError(state, err)) : resolve(value as T)),
      );
    });
  } finally {
    opts.signal?.removeEventListener('abort', onAbort);
    client.close();
  }
}
