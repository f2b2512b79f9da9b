/**
 * conf-writer.ts: `multus install` writing 00-multus.conf(list) (docs/install.md): generated from the master CNI
 * config (`auto`) or copied from --multus-conf-file, and noticing other writers of that file: one that renamed
 * ours away (renamed-conf.ts) and one that wrote its own, another Multus DaemonSet or installer, at start or
 * after our write (a warning in the log and a Warning event on the node, each at most every 10 minutes).
 */
import { rename } from 'node:fs/promises';
import { join } from 'node:path';
import { GENERATED_FILES, generateMultusConf, pickMaster } from '../multus/generate-conf.ts';
import {
  FOREIGN_REASON,
  RENAMED_REASON,
  foreignConfMessage,
  renamedAway,
  renamedAwayMessage,
} from '../multus/renamed-conf.ts';
import { basename, errText, listDir, readIfExists, removeIfExists, sha256, writeAtomic } from './files.ts';
import { InstallError, type InstallOptions } from './options.ts';

/** A renamed-away or foreign 00-multus.conf is reported at most this often (another writer may go on). */
const RENAMED_WARNING_MS = 10 * 60_000;

/** What the writer needs of the installer's deps (install.ts' InstallDeps). */
export interface ConfWriterDeps {
  log(line: string): void;
  now?(): number;
  warnNode?(w: { kubeconfig: string; reason: string; message: string }): Promise<void>;
}

export interface ConfState {
  masterKey: string | null;
  /** what we last wrote, and where */
  written: { path: string; text: string } | null;
  renamedWarnedAt: number | null;
  foreignWarnedAt: number | null;
}

export const newConfState = (): ConfState => ({
  masterKey: null,
  written: null,
  renamedWarnedAt: null,
  foreignWarnedAt: null,
});

async function findMaster(o: InstallOptions): Promise<string | null> {
  const { names, dirs } = await listDir(o.multusAutoconfigDir);
  const name = pickMaster(names, o.multusMasterCniFileName, { mode: 'thin', isDir: (n) => dirs.has(n) });
  return name === undefined ? null : join(o.multusAutoconfigDir, name);
}

/** A warning in the log and on the node, at most every RENAMED_WARNING_MS per kind. */
async function warn(o: InstallOptions, deps: ConfWriterDeps, last: number | null, reason: string, message: string) {
  const now = deps.now?.() ?? Date.now();
  if (last !== null && now - last < RENAMED_WARNING_MS) return last;
  deps.log(`warning: ${message}`);
  await deps.warnNode?.({ kubeconfig: join(o.cniConfDir, 'multus.d', 'multus.kubeconfig'), reason, message });
  return now;
}

/** Before we write `text` to `path`: does it hold neither that nor what we wrote last? Another writer then. */
async function noteForeign(o: InstallOptions, deps: ConfWriterDeps, cs: ConfState, path: string, text: string) {
  // best effort: a path we cannot read (a directory) fails the write below with its own message
  const onDisk = (await readIfExists(path, 'multus config').catch(() => null))?.toString('utf8');
  if (onDisk === undefined || onDisk === text || onDisk === cs.written?.text) return;
  const message = foreignConfMessage(path, cs.written === null ? 'start' : 'later');
  cs.foreignWarnedAt = await warn(o, deps, cs.foreignWarnedAt, FOREIGN_REASON, message);
}

/** Our file is gone, changed by another, or as we wrote it. */
async function ownFile(cs: ConfState): Promise<'ours' | 'missing' | 'changed'> {
  if (cs.written === null) return 'missing';
  const onDisk = await readIfExists(cs.written.path, 'multus config');
  if (onDisk === null) return 'missing';
  return onDisk.toString('utf8') === cs.written.text ? 'ours' : 'changed';
}

/**
 * Generates 00-multus.conf(list) from the current master when it or our file changed. Returns false when there
 * is no master (nothing is written or removed then: the last good file stays, as in Multus).
 */
export async function refreshMultusConf(o: InstallOptions, deps: ConfWriterDeps, cs: ConfState): Promise<boolean> {
  const path = await findMaster(o);
  if (path === null) return false;
  const bytes = await readIfExists(path, 'master CNI config');
  if (bytes === null) return false;
  const key = `${path}\0${sha256(bytes)}`;
  if (key === cs.masterKey) {
    const state = await ownFile(cs);
    if (state === 'ours') return true;
    if (state === 'missing') await noteRenamedAway(o, deps, cs);
  }
  const conf = generateMultusConf(bytes.toString('utf8'), path, { ...o, mode: 'thin' });
  const out = join(o.cniConfDir, conf.fileName);
  if (cs.masterKey !== null && key !== cs.masterKey) deps.log('master config changed - recreating multus config');
  await noteForeign(o, deps, cs, out, conf.text);
  await writeAtomic(out, conf.text, 0o600);
  // A stale file of the other name would shadow (00-multus.conf sorts first) or duplicate the new one.
  for (const other of GENERATED_FILES) if (other !== conf.fileName) await removeIfExists(join(o.cniConfDir, other));
  deps.log(`multus config file ${out} is created from ${path}`);
  cs.masterKey = key;
  cs.written = { path: out, text: conf.text };
  if (o.renameConfFile) {
    try {
      await rename(path, `${path}.old`);
    } catch (e) {
      throw new InstallError(`cannot move original master file ${path} to ${path}.old (${errText(e)})`);
    }
    deps.log(`Original master file moved to "${path}.old"`);
  }
  return true;
}

/** --multus-conf-file PATH: copied into the conf dir as is (once, as Multus' entrypoint). */
export async function copyGivenConf(o: InstallOptions, deps: ConfWriterDeps, cs: ConfState): Promise<void> {
  const data = await readIfExists(o.multusConfFile, 'multus-conf-file');
  if (data === null) throw new InstallError(`multus-conf-file ${o.multusConfFile} disappeared`);
  const out = join(o.cniConfDir, basename(o.multusConfFile));
  await noteForeign(o, deps, cs, out, data.toString('utf8'));
  await writeAtomic(out, data, 0o600);
  cs.written = { path: out, text: data.toString('utf8') };
  deps.log(`multus config file ${o.multusConfFile} is copied.`);
}

/** Our file went missing: if another program renamed it (Cilium's `.cilium_bak`), say so in the log and an event. */
async function noteRenamedAway(o: InstallOptions, deps: ConfWriterDeps, cs: ConfState): Promise<void> {
  const found = renamedAway((await listDir(o.cniConfDir)).names, GENERATED_FILES);
  if (!found) return;
  cs.renamedWarnedAt = await warn(o, deps, cs.renamedWarnedAt, RENAMED_REASON, renamedAwayMessage(o.cniConfDir, found));
}
