/**
 * Downloads one file of a Hub repository into a staging folder, and checks files against what the
 * Hub says about them.
 *
 * - Verified: by sha256 for LFS files and by git blob sha1 for the others when the Hub gives them,
 *   by size otherwise. A file that does not match is deleted and the download fails.
 * - Resumable: a file is written as `<file>.part` and a broken transfer continues from its length
 *   with a Range request, within the same run (a few retries) or in a later one. A server that
 *   ignores the range (200 instead of 206) is handled by starting the file over.
 */
import { existsSync } from 'node:fs';
import { mkdir, open, rename, rm, stat } from 'node:fs/promises';
import { dirname } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { StartupError, type StartupCode } from '../errors.js';
import { fileChecksum, HubError, type Hub, type RemoteFile } from './hub.js';
import type { DownloadProgress, FileOutcome, Verification } from './download-progress.js';

/** A download that could not be completed, or a model that is refused; nothing incomplete was put in the model folder. */
export class DownloadError extends StartupError {
  override name = 'DownloadError';
  /** hub_unreachable when it comes of no answer from the Hub at all (DNS, connection): not a download that broke off. */
  get code(): StartupCode {
    for (let cause = this.cause; cause instanceof Error; cause = cause.cause) {
      if (cause instanceof HubError && cause.status === undefined) return 'hub_unreachable';
    }
    return 'download_failed';
  }
}

export interface TransferOptions {
  hub: Hub;
  /** Fetch the file again even when a finished copy is staged. */
  force?: boolean;
  /** Retries of a broken transfer within this run (each resumes where the last stopped). */
  retries?: number;
  /** Wait before retry number `attempt` (1-based), in ms. */
  retryDelay?: (attempt: number) => number;
  signal?: AbortSignal;
}

/** Downloads one file to `target` (via `target.part`, resumed if one is there) and verifies it. */
export async function stageFile(
  remote: RemoteFile,
  target: string,
  progress: DownloadProgress,
  options: TransferOptions,
): Promise<FileOutcome> {
  // A file finished in an earlier run that broke off later is kept if it still matches.
  if (!options.force && existsSync(target)) {
    const check = await verify(target, remote);
    if (check.ok)
      return { status: 'downloaded', bytes: check.bytes, verifiedBy: check.verifiedBy, checksum: remote.checksum };
    await rm(target, { force: true });
  }
  const part = `${target}.part`;
  await mkdir(dirname(part), { recursive: true });
  if (options.force) await rm(part, { force: true });

  const retries = options.retries ?? 4;
  const delay = options.retryDelay ?? ((attempt: number) => 1000 * 2 ** (attempt - 1));
  let expected: number | undefined;
  for (let attempt = 1; ; attempt++) {
    try {
      expected = await transfer(remote, part, progress, options.hub, options.signal);
      break;
    } catch (error) {
      if (!isTransient(error) || attempt > retries) {
        const kept = existsSync(part) ? ` The partial file is kept and resumed by the next pull.` : '';
        if (error instanceof HubError || error instanceof DownloadError)
          throw new DownloadError(`${error.message}${kept}`, { cause: error });
        throw new DownloadError(`${remote.path}: the transfer broke off (${reasonOf(error)}).${kept}`, {
          cause: error,
        });
      }
      progress.retry(remote.path, reasonOf(error), attempt + 1);
      await sleep(delay(attempt), undefined, { signal: options.signal });
    }
  }

  const check = await verify(part, { ...remote, size: expected });
  if (!check.ok) {
    // A corrupt file must not be resumed from either.
    await rm(part, { force: true });
    throw new DownloadError(
      `${remote.path} from ${remote.repo} at ${remote.revision} is corrupt: ${check.why}. It was deleted; nothing was installed.`,
    );
  }
  await rename(part, target);
  return { status: 'downloaded', bytes: check.bytes, verifiedBy: check.verifiedBy, checksum: remote.checksum };
}

/**
 * One GET of the file into `part`, from its current length on. Returns the file's full size as
 * the transfer says it (or as the Hub said before), for verification.
 */
async function transfer(
  remote: RemoteFile,
  part: string,
  progress: DownloadProgress,
  hub: Hub,
  signal?: AbortSignal,
): Promise<number | undefined> {
  let offset = await sizeOf(part);
  if (remote.size !== undefined && offset > remote.size) offset = 0;
  if (remote.size !== undefined && offset === remote.size && offset > 0) return remote.size;

  let response = await hub.open(remote, offset, signal);
  let append = false;
  if (response.status === 206) {
    const range = parseContentRange(response.headers.get('content-range'));
    append = range?.start === offset;
    if (!append) {
      // A range other than the one asked for: start the file over.
      await response.body?.cancel();
      offset = 0;
      response = await hub.open(remote, 0, signal);
    }
  } else if (response.status === 416) {
    // The partial file is not a prefix the server can continue: start over.
    await response.body?.cancel();
    offset = 0;
    response = await hub.open(remote, 0, signal);
  }
  // A 200 is the whole file, whether or not a range was asked for.
  if (!append) offset = 0;

  const total = remote.size ?? totalFromResponse(response);
  progress.start(remote.path, total, offset, remote.checksum);
  // Each chunk is on disk before the next is read, so after a broken connection the partial
  // file holds exactly the bytes received: the offset to resume from.
  const file = await open(part, append ? 'a' : 'w');
  try {
    for await (const chunk of response.body as AsyncIterable<Uint8Array>) {
      await file.write(chunk);
      progress.advance(remote.path, chunk.length);
    }
  } finally {
    await file.close();
  }
  const written = await sizeOf(part);
  if (total !== undefined && written < total)
    throw new TransferCut(`the server closed the transfer at ${written} of ${total} bytes`);
  return total;
}

class TransferCut extends Error {}

function totalFromResponse(response: Response): number | undefined {
  if (response.status === 206) return parseContentRange(response.headers.get('content-range'))?.total;
  const length = response.headers.get('content-length');
  return length === null ? undefined : Number(length);
}

function parseContentRange(value: string | null): { start: number; total?: number } | undefined {
  const match = value ? /^bytes (\d+)-\d+\/(\d+|\*)$/.exec(value.trim()) : null;
  if (!match) return undefined;
  return { start: Number(match[1]), total: match[2] === '*' ? undefined : Number(match[2]) };
}

/** Network failures and 5xx/429 answers are worth a retry; refusals and bad content are not. */
function isTransient(error: unknown): boolean {
  if ((error as Error).name === 'AbortError') return false;
  if (error instanceof TransferCut) return true;
  if (error instanceof HubError) return error.status === undefined || error.status >= 500 || error.status === 429;
  if (error instanceof DownloadError) return false;
  // What is left is a network failure (fetch's body stream says "terminated" when the connection
  // drops) or a file system error, which a retry does not cure.
  const code = (error as NodeJS.ErrnoException).code;
  return !(
    code && ['ENOSPC', 'EDQUOT', 'EACCES', 'EPERM', 'EROFS', 'EISDIR', 'ENOTDIR', 'EEXIST', 'ENOENT'].includes(code)
  );
}

function reasonOf(error: unknown): string {
  const cause = (error as { cause?: { message?: string } }).cause;
  // fetch says "terminated" when the connection drops mid-body.
  const message = (error as Error).message === 'terminated' ? 'the connection dropped' : (error as Error).message;
  return cause?.message ? `${message}: ${cause.message}` : message;
}

export type Check = { ok: true; bytes: number; verifiedBy: Verification } | { ok: false; bytes: number; why: string };

/** The file against what the Hub says: checksum if given, size if given. */
export async function verify(path: string, remote: RemoteFile): Promise<Check> {
  const bytes = await sizeOf(path);
  if (remote.size !== undefined && bytes !== remote.size)
    return { ok: false, bytes, why: `${bytes} bytes where ${remote.authority ?? 'the Hub'} says ${remote.size}` };
  if (remote.checksum) {
    const actual = await fileChecksum(path, remote.checksum.algorithm, bytes);
    if (actual !== remote.checksum.hex)
      return {
        ok: false,
        bytes,
        why: `its ${remote.checksum.algorithm} is ${actual} where ${remote.authority ?? 'the Hub'} says ${remote.checksum.hex}`,
      };
    return { ok: true, bytes, verifiedBy: remote.checksum.algorithm };
  }
  return { ok: true, bytes, verifiedBy: remote.size !== undefined ? 'size' : 'unverified' };
}

async function sizeOf(path: string): Promise<number> {
  try {
    return (await stat(path)).size;
  } catch {
    return 0;
  }
}
