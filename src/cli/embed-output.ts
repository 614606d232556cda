/**
 * Where `onnx-gateway embed` writes its vectors: a JSONL file of `{"id", "embedding"}` lines, or a
 * `.npy` file (float32, rows in input order) with the ids one a line in `<name>.ids.txt` beside it.
 * Each slice is written whole before the next, so that a run cut short (Ctrl-C, a kill) leaves files
 * that `--resume` reads back, embedding nothing twice.
 */
import { closeSync, existsSync, fstatSync, openSync, readFileSync, readSync, truncateSync, writeSync } from 'node:fs';
import { float32ToJson } from '../vectors/encoding.js';

export interface EmbeddingSink {
  /** The ids an earlier run wrote (empty unless resuming). */
  readonly done: Set<string>;
  /** The files written, for the messages. */
  readonly files: string;
  /** Appends one slice: `vectors` holds `ids.length` rows of `dimensions` values. */
  write(ids: string[], vectors: Float32Array, dimensions: number): void;
  close(): void;
}

/** A sink for `path`: `.npy` by its extension, else JSONL. */
export function openSink(path: string, resume: boolean): EmbeddingSink {
  return /\.npy$/i.test(path) ? new NpySink(path, resume) : new JsonlSink(path, resume);
}

/** The files a sink for `path` writes, which must not exist unless resuming. */
export function sinkFiles(path: string): string[] {
  return /\.npy$/i.test(path) ? [path, idsFile(path)] : [path];
}

const idsFile = (path: string) => path.replace(/\.npy$/i, '.ids.txt');

class JsonlSink implements EmbeddingSink {
  readonly done = new Set<string>();
  private readonly fd: number;

  constructor(
    readonly files: string,
    resume: boolean,
  ) {
    if (resume) for (const line of wholeLines(files)) this.done.add((JSON.parse(line) as { id: string }).id);
    this.fd = openSync(files, 'a');
  }

  write(ids: string[], vectors: Float32Array, dimensions: number): void {
    let lines = '';
    ids.forEach((id, i) => {
      const row = vectors.subarray(i * dimensions, (i + 1) * dimensions);
      lines += `{"id":${JSON.stringify(id)},"embedding":${float32ToJson(row)}}\n`;
    });
    writeSync(this.fd, lines);
  }

  close(): void {
    closeSync(this.fd);
  }
}

/**
 * NumPy's format 1.0 with a header of fixed size, rewritten after each slice with the rows so far:
 * the vectors are appended first, then their ids, then the header, so that after a kill the rows
 * and the ids agree up to the shorter of the two, which a resume keeps.
 */
class NpySink implements EmbeddingSink {
  readonly done = new Set<string>();
  readonly files: string;
  private fd?: number;
  private idsFd?: number;
  private rows = 0;
  private dimensions?: number;

  constructor(
    private readonly path: string,
    resume: boolean,
  ) {
    this.files = `${path} (ids in ${idsFile(path)})`;
    if (!resume || !existsSync(path)) return;
    const fd = openSync(path, 'r+');
    const { dimensions } = readNpyHeader(fd, path);
    const rows = Math.floor((fstatSync(fd).size - npyHeaderBytes) / (4 * dimensions));
    const ids = existsSync(idsFile(path)) ? wholeLines(idsFile(path)) : [];
    const kept = Math.min(rows, ids.length);
    truncateSync(path, npyHeaderBytes + kept * 4 * dimensions);
    const keptIds = ids.slice(0, kept);
    truncateSync(idsFile(path), Buffer.byteLength(keptIds.map((id) => `${id}\n`).join('')));
    keptIds.forEach((id) => this.done.add(id));
    this.fd = fd;
    this.idsFd = openSync(idsFile(path), 'a');
    this.rows = kept;
    this.dimensions = dimensions;
    writeSync(fd, npyHeader(kept, dimensions), 0, npyHeaderBytes, 0);
  }

  write(ids: string[], vectors: Float32Array, dimensions: number): void {
    if (this.dimensions !== undefined && this.dimensions !== dimensions)
      throw new Error(`${this.path} holds vectors of ${this.dimensions} dimensions; these have ${dimensions}.`);
    if (this.fd === undefined) {
      this.fd = openSync(this.path, 'w+');
      this.idsFd = openSync(idsFile(this.path), 'w');
      writeSync(this.fd, npyHeader(0, dimensions), 0, npyHeaderBytes, 0);
    }
    this.dimensions = dimensions;
    const bytes = new Uint8Array(vectors.buffer, vectors.byteOffset, ids.length * dimensions * 4);
    writeSync(this.fd, bytes, 0, bytes.length, npyHeaderBytes + this.rows * dimensions * 4);
    writeSync(this.idsFd!, ids.map((id) => `${id}\n`).join(''));
    this.rows += ids.length;
    writeSync(this.fd, npyHeader(this.rows, dimensions), 0, npyHeaderBytes, 0);
  }

  close(): void {
    if (this.fd !== undefined) closeSync(this.fd);
    if (this.idsFd !== undefined) closeSync(this.idsFd);
  }
}

/** The header's size: room for any row count, a multiple of 64 as the format asks. */
const npyHeaderBytes = 128;

function npyHeader(rows: number, dimensions: number): Uint8Array {
  const header = Buffer.alloc(npyHeaderBytes, 0x20);
  Buffer.from('\x93NUMPY', 'latin1').copy(header, 0);
  header[6] = 1;
  header[7] = 0;
  header.writeUInt16LE(npyHeaderBytes - 10, 8);
  header.write(`{'descr': '<f4', 'fortran_order': False, 'shape': (${rows}, ${dimensions}), }`, 10, 'latin1');
  header[npyHeaderBytes - 1] = 0x0a;
  return header;
}

function readNpyHeader(fd: number, path: string): { rows: number; dimensions: number } {
  const header = Buffer.alloc(npyHeaderBytes);
  readSync(fd, header, 0, npyHeaderBytes, 0);
  const shape = /'descr': '<f4', 'fortran_order': False, 'shape': \((\d+), (\d+)\)/.exec(header.toString('latin1'));
  if (header.toString('latin1', 0, 6) !== '\x93NUMPY' || !shape)
    throw new Error(`${path} is not a .npy file this command wrote; move it away or name another output.`);
  return { rows: Number(shape[1]), dimensions: Number(shape[2]) };
}

/**
 * The complete lines of a file. A last line without its line break was cut by a kill: it is
 * removed from the file, and its input embedded again.
 */
function wholeLines(path: string): string[] {
  if (!existsSync(path)) return [];
  const text = readFileSync(path, 'utf8');
  const whole = text.lastIndexOf('\n') + 1;
  if (whole < text.length) truncateSync(path, Buffer.byteLength(text.slice(0, whole)));
  return text
    .slice(0, whole)
    .split('\n')
    .filter((line) => line !== '');
}
