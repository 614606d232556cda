/**
 * The lock file of a model pulled from the Hub, `<model dir>/onnx-gateway.lock.json`: the commit
 * the requested revision resolved to and every file taken from it, with its size and checksum.
 * The next pull re-uses the commit (so a branch that moved on does not change the model under a
 * server), and the server and `models list` name it.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { isSafePath } from './repo-files.js';
import type { Variant } from './variants.js';

export const LOCK_FILE = 'onnx-gateway.lock.json';

export interface LockedFile {
  /** Path in the repository and in the model folder. */
  path: string;
  size: number;
  /** Content checksums as the Hub gave them: sha256 for LFS files, the git blob sha1 for the others. */
  sha256?: string;
  gitSha1?: string;
}

export interface ModelLock {
  version: 1;
  /** The Hub repository, `owner/name`. */
  repo: string;
  /** The revision asked for: a branch, tag or commit (the catalogue's pin, or `main`, when none was named). */
  revision: string;
  /** The commit it resolved to; every file is from it. */
  commit: string;
  /** The graph of each variant pulled (the registry loads `variants[variant]`). */
  variants: Partial<Record<Variant, string>>;
  /** Every file pulled, graphs and external-data files included. */
  files: LockedFile[];
  /** When the pull finished (ISO 8601). */
  pulledAt: string;
}

export class LockFileError extends Error {
  override name = 'LockFileError';
}

/** The lock file of a model folder, if it has one. */
export function readLock(dir: string): ModelLock | undefined {
  const path = join(dir, LOCK_FILE);
  if (!existsSync(path)) return undefined;
  let lock: ModelLock;
  try {
    lock = JSON.parse(readFileSync(path, 'utf8')) as ModelLock;
  } catch (error) {
    throw new LockFileError(
      `${path} is not valid JSON (${(error as Error).message}): delete it and pull the model again.`,
    );
  }
  const valid =
    lock?.version === 1 &&
    typeof lock.repo === 'string' &&
    typeof lock.commit === 'string' &&
    typeof lock.revision === 'string' &&
    typeof lock.variants === 'object' &&
    Array.isArray(lock.files) &&
    lock.files.every((file) => typeof file?.path === 'string' && typeof file.size === 'number') &&
    Object.values(lock.variants as Record<string, unknown>).every((graph) => typeof graph === 'string');
  if (!valid)
    throw new LockFileError(
      `${path} is not an onnx-gateway lock file of version 1: delete it and pull the model again.`,
    );
  // A pull deletes the files of the old lock that the new one does not list, and the registry opens
  // its graphs: a path that leaves the folder (a lock copied from elsewhere) is refused, as the
  // Hub's own listing is.
  const outside = [...lock.files.map((file) => file.path), ...Object.values(lock.variants)].find(
    (file) => !isSafePath(file),
  );
  if (outside !== undefined)
    throw new LockFileError(
      `${path} names "${outside}", which is not a path inside the model folder: delete it and pull the model again.`,
    );
  return lock;
}

export function formatLock(lock: ModelLock): string {
  return `${JSON.stringify(lock, null, 2)}\n`;
}
