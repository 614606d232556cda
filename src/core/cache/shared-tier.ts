/**
 * The embedding cache's shared tier: pooled vectors in Redis, as their little-endian float32 bytes
 * under `onnx-gateway:embedding:<key>`, expiring after the TTL, so replicas behind one load balancer
 * reuse each other's results. Redis is an optimisation here, never a dependency: a lookup that
 * fails or takes longer than a moment counts as a miss, a store that fails is dropped, the first
 * error of an outage is logged and every error counted, and requests go on being computed.
 */
import { Redis } from 'ioredis';
import { redactUrl } from '../../redact-url.js';

const keyPrefix = 'onnx-gateway:embedding:';
/** Longest a lookup may hold a request up before it is given up as a miss. */
const commandTimeoutMs = 1000;

export interface CacheLog {
  warn(message: string): void;
  info(message: string): void;
}

export class SharedTier {
  private readonly redis: Redis;
  /** Vectors found, and commands that failed. */
  hits = 0;
  errors = 0;
  /** Whether the current outage was logged already. */
  private failing = false;

  constructor(
    url: string,
    private readonly ttlSeconds: number,
    private readonly log: CacheLog,
  ) {
    // No offline queue: while Redis is unreachable a command fails at once instead of waiting for
    // the reconnect, and the request is computed instead. Reconnects go on in the background.
    this.redis = new Redis(url, {
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      commandTimeout: commandTimeoutMs,
      connectTimeout: 5000,
    });
    // Connection errors repeat on every reconnect attempt: logged once, not counted (failed commands are).
    this.redis.on('error', (error: Error) => this.report(error));
    this.redis.on('ready', () => {
      if (this.failing) this.log.info(`embedding cache: Redis at ${redactUrl(url)} is reachable again`);
      this.failing = false;
    });
  }

  /** The vectors stored under `keys`, in order; undefined where absent, of another width, or when Redis fails. */
  async get(keys: string[], width: number): Promise<(Float32Array | undefined)[]> {
    let values: (Buffer | null)[];
    try {
      values = await this.redis.mgetBuffer(...keys.map((key) => keyPrefix + key));
    } catch (error) {
      this.failed(error as Error);
      return keys.map(() => undefined);
    }
    return values.map((value) => {
      if (value === null || value.byteLength !== width * 4) return undefined;
      this.hits++;
      // Copied: a Buffer's offset need not be a multiple of 4.
      const vector = new Float32Array(width);
      new Uint8Array(vector.buffer).set(value);
      return vector;
    });
  }

  /** Stores vectors with the TTL, in one round trip; not awaited by requests, and never throws. */
  set(entries: [key: string, vector: Float32Array][]): Promise<void> {
    if (entries.length === 0) return Promise.resolve();
    const pipeline = this.redis.pipeline();
    for (const [key, vector] of entries)
      pipeline.set(
        keyPrefix + key,
        Buffer.from(vector.buffer, vector.byteOffset, vector.byteLength),
        'EX',
        this.ttlSeconds,
      );
    return pipeline.exec().then(
      (results) => {
        const failure = results?.find(([error]) => error !== null)?.[0];
        if (failure) this.failed(failure);
      },
      (error: Error) => this.failed(error),
    );
  }

  async close(): Promise<void> {
    try {
      await this.redis.quit();
    } catch {
      this.redis.disconnect();
    }
  }

  private failed(error: Error): void {
    this.errors++;
    this.report(error);
  }

  private report(error: Error): void {
    if (this.failing) return;
    this.failing = true;
    this.log.warn(
      `embedding cache: Redis is failing (${error.message}); computing without the shared tier until it is back`,
    );
  }
}
