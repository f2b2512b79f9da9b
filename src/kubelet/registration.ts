/**
 * registration.ts: the kubelet's plugin registration, `pluginregistration.Registration` (I/O). A plugin puts
 * this server's socket in the kubelet's plugins_registry/ directory; the kubelet's plugin watcher sees it, calls
 * `GetInfo` (what plugin this is and where its service listens), validates it, then calls
 * `NotifyRegistrationStatus` with the outcome. A DRA driver answers type `DRAPlugin`, its driver name, its
 * `dra.sock` and the service versions it serves (e.g. `v1.DRAPlugin`).
 */
import { serviceDefinition } from './grpc.ts';
import { serveUnix } from './server.ts';
import type { ServeOptions, Serving } from './server.ts';
import { SERVICES } from './services.ts';

/** `pluginregistration.PluginInfo`. */
export interface PluginInfo {
  /** `DRAPlugin`, `CSIPlugin` or `DevicePlugin`. */
  type: string;
  name: string;
  /** The socket of the plugin's own service. */
  endpoint: string;
  supportedVersions: string[];
}

/** `pluginregistration.RegistrationStatus`: the kubelet's verdict. */
export interface RegistrationStatus {
  pluginRegistered: boolean;
  error: string;
}

export interface RegistrationOptions extends Omit<ServeOptions, 'services'> {
  info: PluginInfo;
  /** Called with each verdict the kubelet sends (again after each kubelet restart). */
  onStatus: (status: RegistrationStatus) => void;
}

/** Serves the registration service on `socketPath` until `signal` aborts. */
export function serveRegistration(opts: RegistrationOptions): Promise<Serving> {
  const { info, onStatus, ...serve } = opts;
  const service = serviceDefinition(SERVICES.registration);
  return serveUnix({
    ...serve,
    services: [
      {
        service,
        handlers: {
          GetInfo: (_call: unknown, callback: (err: null, value: PluginInfo) => void) => callback(null, { ...info }),
          NotifyRegistrationStatus: (
            call: { request: RegistrationStatus },
            callback: (err: null, value: object) => void,
          ) => {
            onStatus({ pluginRegistered: call.request.pluginRegistered, error: call.request.error });
            callback(null, {});
          },
        },
      },
    ],
  });
}
