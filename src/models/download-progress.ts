/**
 * How a download shows its progress: a bar per file on a terminal (cli-progress), plain lines
 * otherwise (logs, CI, pipes), so that no control characters end up in a file.
 */
import { Presets, SingleBar } from 'cli-progress';
import type { Checksum } from './hub.js';

/** How a file's bytes were checked against what the Hub says. */
export type Verification = 'sha256' | 'git-sha1' | 'size' | 'unverified';

export interface FileOutcome {
  /** `present`: a file already on disk matched the Hub, nothing was fetched. */
  status: 'downloaded' | 'present';
  bytes: number;
  verifiedBy: Verification;
  /** The checksum it matched, when verified by one. */
  checksum?: Checksum;
}

export interface DownloadProgress {
  /** A file's download starts (`from` > 0: resumed from a partial file); `checksum`: what it must match, when the Hub says. */
  start(file: string, total: number | undefined, from: number, checksum?: Checksum): void;
  advance(file: string, bytes: number): void;
  /** A transfer broke off and is retried from where it stopped. */
  retry(file: string, reason: string, attempt: number): void;
  finish(file: string, outcome: FileOutcome): void;
  /** Releases the terminal (call once, after the last file or on failure). */
  stop(): void;
}

/** Decimal units, as the Hub shows sizes. */
export function formatBytes(bytes: number): string {
  if (bytes < 1e3) return `${bytes} B`;
  if (bytes < 1e6) return `${(bytes / 1e3).toFixed(1)} kB`;
  if (bytes < 1e9) return `${(bytes / 1e6).toFixed(1)} MB`;
  return `${(bytes / 1e9).toFixed(2)} GB`;
}

const describe = (outcome: FileOutcome) =>
  `${outcome.status === 'present' ? 'present' : 'downloaded'}, ${formatBytes(outcome.bytes)}, ${outcome.verifiedBy === 'unverified' ? 'not verified (the Hub gave no size or checksum)' : `verified by ${outcome.verifiedBy}`}`;

/** A bar on a TTY, plain lines on anything else. */
export function progressFor(stream: NodeJS.WriteStream = process.stderr): DownloadProgress {
  return stream.isTTY ? new BarProgress(stream) : new LineProgress(stream);
}

/** One line when a file starts, at each tenth of a large file, and when it is done. */
export class LineProgress implements DownloadProgress {
  private readonly files = new Map<string, { total?: number; done: number; tenth: number }>();

  constructor(private readonly stream: NodeJS.WritableStream) {}

  start(file: string, total: number | undefined, from: number): void {
    this.files.set(file, { total, done: from, tenth: total ? Math.floor((10 * from) / total) : 0 });
    const size = total === undefined ? 'size unknown' : formatBytes(total);
    this.stream.write(
      from > 0 ? `${file}: resuming at ${formatBytes(from)} of ${size}\n` : `${file}: downloading ${size}\n`,
    );
  }

  advance(file: string, bytes: number): void {
    const state = this.files.get(file);
    if (!state) return;
    state.done += bytes;
    // Intermediate lines only for files big enough to take a while.
    if (!state.total || state.total < 10e6) return;
    const tenth = Math.floor((10 * state.done) / state.total);
    if (tenth > state.tenth && tenth < 10) {
      state.tenth = tenth;
      this.stream.write(`${file}: ${tenth * 10}% of ${formatBytes(state.total)}\n`);
    }
  }

  retry(file: string, reason: string, attempt: number): void {
    this.stream.write(`${file}: ${reason}; resuming (attempt ${attempt})\n`);
  }

  finish(file: string, outcome: FileOutcome): void {
    this.files.delete(file);
    this.stream.write(`${file}: ${describe(outcome)}\n`);
  }

  stop(): void {}
}

/**
 * A cli-progress bar for the file being downloaded; when it is done the bar gives way to the
 * file's line, so the screen ends as a list of files.
 */
export class BarProgress implements DownloadProgress {
  private bar: SingleBar | undefined;

  constructor(private readonly stream: NodeJS.WriteStream) {}

  start(file: string, total: number | undefined, from: number): void {
    this.clear();
    this.bar = new SingleBar(
      {
        stream: this.stream,
        format: `${file} |{bar}| {percentage}% | {value} / {total} | {eta_formatted}`,
        formatValue: (value, _options, type) =>
          type === 'value' || type === 'total'
            ? formatBytes(value)
            : type === 'percentage'
              ? String(value).padStart(3)
              : String(value),
        hideCursor: true,
        clearOnComplete: true,
        etaBuffer: 50,
      },
      Presets.shades_classic,
    );
    this.bar.start(total ?? 0, from);
  }

  advance(_file: string, bytes: number): void {
    this.bar?.increment(bytes);
  }

  retry(file: string, reason: string, attempt: number): void {
    this.clear();
    this.stream.write(`${file}: ${reason}; resuming (attempt ${attempt})\n`);
  }

  finish(file: string, outcome: FileOutcome): void {
    this.clear();
    this.stream.write(`${file}: ${describe(outcome)}\n`);
  }

  stop(): void {
    this.clear();
  }

  /** Takes the bar off the screen (clearOnComplete) so that a plain line can follow. */
  private clear(): void {
    if (!this.bar) return;
    this.bar.stop();
    this.bar = undefined;
  }
}

/** Reports nothing (library use, tests). */
export const silentProgress: DownloadProgress = { start() {}, advance() {}, retry() {}, finish() {}, stop() {} };
