/**
 * A throwaway Redis for tests: Debian's redis-server on a free loopback port, no persistence,
 * its files in a temporary dir. Tests that need it skip (with SKIP_REASON) when it is not
 * installed; .ci/run installs it.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';

export const hasRedisServer = spawnSync('redis-server', ['--version']).status === 0;
export const REDIS_SKIP_REASON =
  "needs Debian's redis-server on PATH (apt-get install -y redis-server; .ci/run installs it)";

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

export interface RedisServer {
  url: string;
  child: ChildProcess;
  /** Kills the server and waits for it to exit. */
  stop(): Promise<void>;
}

/** Starts redis-server with its working files in `dir` and resolves once it answers PING. */
export async function startRedisServer(dir: string): Promise<RedisServer> {
  const port = await freePort();
  const child = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir],
    { stdio: 'ignore' },
  );
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const url = `redis://127.0.0.1:${port}`;
  // redis-server takes a moment to listen.
  let pong = '';
  for (let i = 0; i < 100 && pong !== 'PONG' && child.exitCode === null; i++) {
    const probe = new Redis(url, { lazyConnect: true, retryStrategy: () => null, maxRetriesPerRequest: 0 });
    probe.on('error', () => undefined);
    pong = await probe.connect().then(
      () => probe.ping(),
      () => '',
    );
    probe.disconnect();
    if (pong !== 'PONG') await sleep(50);
  }
  if (pong !== 'PONG') {
    child.kill('SIGKILL');
    throw new Error(`redis-server on port ${port} did not answer`);
  }
  return {
    url,
    child,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}
