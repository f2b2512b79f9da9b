/**
 * devices/device-info.ts: device-info files (docs/behaviour.md#device-info). The paths are pure; copying the device
 * plugin's file to the attachment's CNIDeviceInfoFile, reading it for network-status and removing it on DEL are
 * I/O, and never fail a call (a problem comes back as a warning to log).
 * Tested by test/unit/devices/devices.test.ts.
 */
import { closeSync, fchmodSync, linkSync, mkdirSync, openSync, readFileSync, unlinkSync, writeSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import type { ReadOutcome } from '../base/files.ts';
import { CniCode, CniError, messageOf } from '../base/errors.ts';
import { isObject } from '../base/json.ts';
import type { Json } from './devices.ts';
import { CNI_DEVINFO_DIR, DP_DEVINFO_DIR } from './devices.ts';

// ---------------------------------------------------------------------------------------------------------------
// Device-info files (docs/behaviour.md#device-info): paths are pure, the rest I/O

/** The CNIDeviceInfoFile of one attachment: `<dir>/<name>-<containerID>_<ifName>`, every '/' in it made '-'. */
export function deviceInfoPath(
  delegateName: string,
  containerId: string,
  ifName: string,
  dir = CNI_DEVINFO_DIR,
): string {
  return join(dir, `${delegateName}-${containerId}_${ifName}`.replaceAll('/', '-'));
}

/** The file a device plugin writes for one device: `<dir>/<resource>-<deviceID>-device.json`, '/' made '-'. */
export function devicePluginInfoPath(resourceName: string, deviceId: string, dir = DP_DEVINFO_DIR): string {
  return join(dir, `${resourceName.replaceAll('/', '-')}-${deviceId.replaceAll('/', '-')}-device.json`);
}

function isMissing(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === 'ENOENT' || code === 'ENOTDIR';
}

/**
 * Writes `data` to a new file `target` (mode 0444) that readers never see half-written: temp file, then link,
 * which never replaces an existing target (then 'exists').
 */
function writeNewFile(target: string, data: Buffer): 'written' | 'exists' {
  mkdirSync(dirname(target), { recursive: true, mode: 0o700 });
  const temp = join(
    dirname(target),
    `.${basename(target)}.tmp-${process.pid}-${Math.random().toString(36).slice(2, 10)}`,
  );
  let fd: number | undefined = openSync(temp, 'wx', 0o444);
  try {
    fchmodSync(fd, 0o444);
    for (let off = 0; off < data.length;) off += writeSync(fd, data, off, data.length - off);
    closeSync(fd);
    fd = undefined;
    return linkTo(temp, target);
  } finally {
    if (fd !== undefined) closeQuietly(fd);
    unlinkQuietly(temp);
  }
}

function linkTo(existing: string, target: string): 'written' | 'exists' {
  try {
    linkSync(existing, target);
    return 'written';
  } catch (err) {
    if ((err as { code?: unknown }).code === 'EEXIST') return 'exists';
    throw err;
  }
}

/** Cleanup after the real outcome, which is the one reported. */
function closeQuietly(fd: number): void {
  try {
    closeSync(fd);
  } catch {
    // already reported: the write failed
  }
}

function unlinkQuietly(path: string): void {
  try {
    unlinkSync(path);
  } catch {
    // already gone
  }
}

/**
 * Copies the device plugin's info file for `deviceId` to `target` (the attachment's CNIDeviceInfoFile), as
 * Go Multus does before the delegate's ADD. A missing source is normal (not every device plugin writes one)
 * and returns undefined; any other failure (unreadable or non-JSON source, target already there, cannot
 * write) is not fatal either and comes back as a warning to log.
 */
export function copyDevicePluginInfo(
  resourceName: string,
  deviceId: string,
  target: string,
  dpDir = DP_DEVINFO_DIR,
): string | undefined {
  const source = devicePluginInfoPath(resourceName, deviceId, dpDir);
  let data: Buffer;
  try {
    data = readFileSync(source);
  } catch (err) {
    return isMissing(err) ? undefined : `cannot read device-plugin info ${source}: ${messageOf(err)}`;
  }
  try {
    if (!isObject(JSON.parse(data.toString('utf8'))))
      return `device-plugin info ${source} is not a JSON object: not copied`;
  } catch (err) {
    return `device-plugin info ${source} is not JSON (${messageOf(err)}): not copied`;
  }
  try {
    if (writeNewFile(target, data) === 'written') return undefined;
    return `cannot copy device-plugin info ${source} to ${target}: it already exists`;
  } catch (err) {
    return `cannot copy device-plugin info ${source} to ${target}: ${messageOf(err)}`;
  }
}

/** The CNIDeviceInfoFile's content for network-status `device-info`; missing is not corrupt. */
export function readDeviceInfo(path: string): ReadOutcome<Json> {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    if (isMissing(err)) return { kind: 'missing' };
    return {
      kind: 'corrupt',
      error: new CniError(CniCode.IoFailure, `cannot read device info ${path}: ${messageOf(err)}`, { cause: err }),
    };
  }
  try {
    const value: unknown = JSON.parse(text);
    if (isObject(value)) return { kind: 'ok', value };
    return {
      kind: 'corrupt',
      error: new CniError(CniCode.DecodingFailure, `device info ${path} is not a JSON object`),
    };
  } catch (err) {
    return {
      kind: 'corrupt',
      error: new CniError(CniCode.DecodingFailure, `device info ${path} is not JSON: ${messageOf(err)}`, {
        cause: err,
      }),
    };
  }
}

/** Removes the CNIDeviceInfoFile after the delegate's DEL; missing is fine, other failures are a warning. */
export function removeDeviceInfo(path: string): string | undefined {
  try {
    unlinkSync(path);
    return undefined;
  } catch (err) {
    return isMissing(err) ? undefined : `cannot remove device info ${path}: ${messageOf(err)}`;
  }
}
