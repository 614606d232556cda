/**
 * The files of the files API on disk: one file per id in the files dir, written from the upload's
 * stream (never held whole in memory) under a temporary name and renamed once complete, so a
 * file of the API is always whole.
 */
import { createHash, randomBytes } from 'node:crypto';
import { createWriteStream, mkdirSync, readdirSync, renameSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { ApiError } from '../errors.js';

/** Temporary uploads older than this are left over from a process that died while receiving them. */
const staleUploadMs = 24 * 3600 * 1000;

export const newFileId = (): string => `file-${randomBytes(12).toString('hex')}`;

/** The id of a batch's output or error file: the same every time, so a finalize that runs twice makes one file. */
export const resultFileId = (batchId: string, kind: 'output' | 'error'): string =>
  `file-${createHash('sha256').update(`${batchId}:${kind}`).digest('hex').slice(0, 24)}`;

export class FileStorage {
  constructor(readonly dir: string) {
    mkdirSync(dir, { recursive: true });
    const now = Date.now();
    for (const name of readdirSync(dir)) {
      if (!name.endsWith('.upload')) continue;
      const path = join(dir, name);
      if (now - statSync(path).mtimeMs > staleUploadMs) rmSync(path, { force: true });
    }
  }

  /** Where a file of the API lives. Ids are made here, never taken from a request as they are. */
  path(id: string): string {
    if (!/^file-[0-9a-f]{24}$/.test(id)) throw new Error(`not a file id: ${id}`);
    return join(this.dir, id);
  }

  /** Where a batch writes its output or error file while it runs. */
  runPath(batchId: string, kind: 'output' | 'error'): string {
    return join(this.dir, `${batchId}.${kind}.jsonl.part`);
  }

  /** Writes an upload's `stream` to a new file: its id and size (write's limit and refusal). */
  async receive(stream: Readable, maxBytes: number): Promise<{ id: string; bytes: number }> {
    const id = newFileId();
    return { id, bytes: await this.write(id, stream, maxBytes) };
  }

  /**
   * Writes `stream` to the file `id`; its size once complete. Past `maxBytes` the upload is
   * refused (413) and nothing is kept.
   */
  async write(id: string, stream: Readable, maxBytes: number): Promise<number> {
    const temporary = `${this.path(id)}.${randomBytes(4).toString('hex')}.upload`;
    let bytes = 0;
    const count = new Transform({
      transform(chunk: Buffer, _encoding, done) {
        bytes += chunk.length;
        if (bytes > maxBytes)
          done(
            new ApiError(
              'payload_too_large',
              `The file is larger than ${maxBytes / 1024 / 1024} MB, the most a file may have (fileMaxMb).`,
              { param: 'file' },
            ),
          );
        else done(null, chunk);
      },
    });
    try {
      await pipeline(stream, count, createWriteStream(temporary, { flags: 'wx' }));
      renameSync(temporary, this.path(id));
      return bytes;
    } catch (error) {
      rmSync(temporary, { force: true });
      throw error;
    }
  }

  remove(id: string): void {
    rmSync(this.path(id), { force: true });
  }
}
