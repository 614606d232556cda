/**
 * Redis connections (shared search tasks, the replicated search index, batches shared by replicas): the start-up
 * probe and an error handler that logs reconnects without flooding the log.
 */
import { Redis } from 'ioredis';
import { StartupError } from './errors.js';
import { redactUrl } from './redact-url.js';

export class RedisUnavailableError extends StartupError {
  override name = 'RedisUnavailableError';
  readonly code = 'redis_unavailable';
}

/** Connects once to check the URL, so that a wrong URL stops the start instead of retrying forever. */
export async function probeRedis(url: string): Promise<void> {
  const redis = new Redis(url, {
    lazyConnect: true,
    connectTimeout: 5000,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  redis.on('error', () => undefined);
  try {
    await redis.connect();
    await redis.ping();
  } catch (error) {
    throw new RedisUnavailableError(
      `Redis at ${redactUrl(url)} is not reachable (${(error as Error).message}); check redisUrl (ONNX_GATEWAY_REDIS_URL).`,
    );
  } finally {
    redis.disconnect();
  }
}

/** ioredis reports every reconnect attempt; one line per 10 s is enough. */
export function throttledErrorLog(
  log: { error(object: unknown, message: string): void } | undefined,
): (error: Error) => void {
  let lastLogged = 0;
  return (error) => {
    if (Date.now() - lastLogged < 10_000) return;
    lastLogged = Date.now();
    log?.error({ err: error }, 'redis connection error');
  };
}
