/**
 * A server started as a real process (`node dist/cli/index.js serve`), with its JSON log lines as they
 * arrive, for tests of what only a whole process shows: signals, start-up refusals, replicas.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { inject } from 'vitest';

export interface LogLine {
  msg: string;
  reqId?: string;
  req?: { url: string };
  [key: string]: unknown;
}

/** The server process and its log lines as they arrive. */
export class ServerProcess {
  readonly lines: LogLine[] = [];
  readonly exited: Promise<number | null>;
  private waiters: { test: (line: LogLine) => boolean; resolve: (line: LogLine) => void }[] = [];

  constructor(readonly child: ChildProcess) {
    createInterface({ input: child.stdout! }).on('line', (text) => {
      let line: LogLine;
      try {
        line = JSON.parse(text) as LogLine;
      } catch {
        return;
      }
      this.lines.push(line);
      this.waiters = this.waiters.filter((waiter) => !(waiter.test(line) && (waiter.resolve(line), true)));
    });
    this.exited = new Promise((resolve) => child.on('exit', (code) => resolve(code)));
  }

  /** Resolves with the first log line (past or future) that passes the test. */
  waitFor(test: (line: LogLine) => boolean): Promise<LogLine> {
    const seen = this.lines.find(test);
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve) => this.waiters.push({ test, resolve }));
  }

  indexOf(test: (line: LogLine) => boolean): number {
    return this.lines.findIndex(test);
  }
}

/**
 * `serve` over the tiny models as a real process: loopback, a free port, one worker, JSON log lines
 * at info; `env` adds settings or overrides these.
 */
export function spawnTinyServer(dataDir: string, env: Record<string, string> = {}): ServerProcess {
  const child = spawn(process.execPath, ['dist/cli/index.js', 'serve'], {
    env: {
      ...process.env,
      ONNX_GATEWAY_MODELS_DIR: inject('tinyModelsDir'),
      ONNX_GATEWAY_MODELS: 'tiny-embedder,tiny-reranker',
      ONNX_GATEWAY_DATA_DIR: dataDir,
      ONNX_GATEWAY_HOST: '127.0.0.1',
      ONNX_GATEWAY_PORT: '0',
      ONNX_GATEWAY_LOG_LEVEL: 'info',
      ONNX_GATEWAY_WORKERS: '1',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  return new ServerProcess(child);
}

/** The base URL once the server listens, after its models are warm. */
export async function listeningUrl(server: ServerProcess): Promise<string> {
  const listening = await server.waitFor((line) => /^Server listening at /.test(line.msg));
  await server.waitFor((line) => line.msg === 'models warm: ready');
  return /(http:\/\/[\d.]+:\d+)/.exec(listening.msg)![1]!;
}
