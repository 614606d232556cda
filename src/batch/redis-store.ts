/**
 * The records of files and batches in Redis, for replicas that share them: a hash per file and
 * per batch, a sorted set per owner for the listings, and a hash of the finished chunks of each
 * running batch. Every change of a batch's status is a Lua script, so two replicas can never both
 * move a batch out of the same status, and a chunk's answers are counted once however many times
 * it ran.
 */
import type { Redis } from 'ioredis';
import type { ChunkResult } from './chunks.js';
import type { Page } from './store.js';
import type { BatchLineError, BatchRecord, BatchStatus, FilePurpose, FileRecord } from './types.js';

const prefix = 'onnx-gateway:batches:';
const seqKey = `${prefix}seq`;
const fileKey = (id: string) => `${prefix}file:${id}`;
const filesKey = (owner: string, purpose?: string) => `${prefix}files:${owner}${purpose ? `:${purpose}` : ''}`;
const batchKey = (id: string) => `${prefix}batch:${id}`;
const batchesKey = (owner: string) => `${prefix}batches:${owner}`;
const chunksKey = (id: string) => `${prefix}chunks:${id}`;
/** How many unfinished batches read each input file (a file in use may not be deleted). */
const readersKey = `${prefix}readers`;
/** The files that expire, scored by their `expiresAt`. */
const expiriesKey = `${prefix}file-expiries`;

/** The field each status stamps when a batch enters it. */
const statusTime: Partial<Record<BatchStatus, string>> = {
  in_progress: 'inProgressAt',
  finalizing: 'finalizingAt',
  completed: 'completedAt',
  failed: 'failedAt',
  expired: 'expiredAt',
  cancelling: 'cancellingAt',
  cancelled: 'cancelledAt',
};

const finalList = ['failed', 'completed', 'expired', 'cancelled'];

/**
 * Moves a batch to ARGV[1], stamping field ARGV[2] (when not '') with ARGV[3] unless already set,
 * when its status is (ARGV[4] = 'only') or is not (ARGV[4] = 'unless') one of the JSON list
 * ARGV[5]; ARGV[6] is a JSON object of more fields to set. A batch that ends stops reading its
 * input. 1 when it moved.
 */
const transitionScript = `
local status = redis.call('HGET', KEYS[1], 'status')
if not status then return 0 end
local listed = false
for _, s in ipairs(cjson.decode(ARGV[5])) do if s == status then listed = true end end
if (ARGV[4] == 'only') ~= listed then return 0 end
redis.call('HSET', KEYS[1], 'status', ARGV[1])
if ARGV[2] ~= '' then redis.call('HSETNX', KEYS[1], ARGV[2], ARGV[3]) end
for field, value in pairs(cjson.decode(ARGV[6])) do redis.call('HSET', KEYS[1], field, tostring(value)) end
local final = {failed = true, completed = true, expired = true, cancelled = true}
if final[ARGV[1]] and not final[status] then
  redis.call('HINCRBY', KEYS[2], redis.call('HGET', KEYS[1], 'inputFileId'), -1)
end
return 1`;

/**
 * Records chunk ARGV[1]'s run (ARGV[2], JSON) unless a run of it was recorded already, and counts
 * its answers (ARGV[3] completed, ARGV[4] failed) and their input tokens (ARGV[5]) once. Returns
 * {newly recorded, every chunk recorded}.
 */
const chunkDoneScript = `
local newly = redis.call('HSETNX', KEYS[2], ARGV[1], ARGV[2])
if newly == 1 then
  redis.call('HINCRBY', KEYS[1], 'completed', ARGV[3])
  redis.call('HINCRBY', KEYS[1], 'failed', ARGV[4])
  redis.call('HINCRBY', KEYS[1], 'inputTokens', ARGV[5])
  redis.call('HINCRBY', KEYS[1], 'chunksDone', 1)
end
local done = tonumber(redis.call('HGET', KEYS[1], 'chunksDone') or '0')
local all = tonumber(redis.call('HGET', KEYS[1], 'chunks') or '-1')
return {newly, done >= all and 1 or 0}`;

/** Deletes a file's record unless an unfinished batch reads it: 1 deleted, 0 none, -1 in use. */
const deleteFileScript = `
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('ZREM', KEYS[3], ARGV[1])
  return 0
end
if tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0') > 0 then return -1 end
local owner = redis.call('HGET', KEYS[1], 'owner')
local purpose = redis.call('HGET', KEYS[1], 'purpose')
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('ZREM', ARGV[2] .. owner, ARGV[1])
redis.call('ZREM', ARGV[2] .. owner .. ':' .. purpose, ARGV[1])
return 1`;

const number = (value: string | undefined): number | null =>
  value === undefined || value === '' ? null : Number(value);

export class RedisBatchStore {
  constructor(private readonly redis: Redis) {}

  // Files.

  /** Inserts a file's record; inserting the same id again changes nothing (a finalize run twice). */
  async insertFile(file: FileRecord): Promise<void> {
    const added = await this.redis.hsetnx(fileKey(file.id), 'owner', file.owner);
    if (added === 0) return;
    const seq = await this.redis.incr(seqKey);
    const writes = this.redis
      .multi()
      .hset(fileKey(file.id), {
        purpose: file.purpose,
        filename: file.filename,
        bytes: String(file.bytes),
        createdAt: String(file.createdAt),
        expiresAt: file.expiresAt === null ? '' : String(file.expiresAt),
        seq: String(seq),
      })
      .zadd(filesKey(file.owner), seq, file.id)
      .zadd(filesKey(file.owner, file.purpose), seq, file.id);
    if (file.expiresAt !== null) writes.zadd(expiriesKey, file.expiresAt, file.id);
    await writes.exec();
  }

  /** Files whose time has come at `now` (those an unfinished batch reads among them: deleteFile keeps them). */
  expiredFiles(now: number): Promise<string[]> {
    return this.redis.zrangebyscore(expiriesKey, '-inf', now);
  }

  async file(id: string): Promise<FileRecord | undefined> {
    const h = await this.redis.hgetall(fileKey(id));
    if (!h.owner || !h.seq) return undefined;
    return {
      id,
      owner: h.owner,
      purpose: h.purpose as FilePurpose,
      filename: h.filename ?? '',
      bytes: Number(h.bytes),
      createdAt: Number(h.createdAt),
      expiresAt: number(h.expiresAt),
    };
  }

  async files(owner: string, page: Page, purpose?: string): Promise<FileRecord[]> {
    const ids = await this.page(filesKey(owner, purpose), fileKey, page);
    return (await Promise.all(ids.map((id) => this.file(id)))).filter((file) => file !== undefined);
  }

  /** Deletes a file's record: true when it did, false when there was none, 'in_use' when a batch reads it. */
  async deleteFile(id: string): Promise<boolean | 'in_use'> {
    const result = await this.redis.eval(
      deleteFileScript,
      3,
      fileKey(id),
      readersKey,
      expiriesKey,
      id,
      `${prefix}files:`,
    );
    return result === -1 ? 'in_use' : result === 1;
  }

  // Batches.

  async insertBatch(batch: BatchRecord): Promise<void> {
    const seq = await this.redis.incr(seqKey);
    await this.redis
      .multi()
      .hset(batchKey(batch.id), {
        owner: batch.owner,
        endpoint: batch.endpoint,
        inputFileId: batch.inputFileId,
        completionWindow: batch.completionWindow,
        outputExpiresAfter: batch.outputExpiresAfter === null ? '' : String(batch.outputExpiresAfter),
        status: batch.status,
        metadata: batch.metadata ? JSON.stringify(batch.metadata) : '',
        createdAt: String(batch.createdAt),
        expiresAt: String(batch.expiresAt),
        total: '0',
        completed: '0',
        failed: '0',
        seq: String(seq),
      })
      .zadd(batchesKey(batch.owner), seq, batch.id)
      .hincrby(readersKey, batch.inputFileId, 1)
      .exec();
  }

  async batch(id: string): Promise<BatchRecord | undefined> {
    const h = await this.redis.hgetall(batchKey(id));
    if (!h.status || !h.owner) return undefined;
    return {
      id,
      owner: h.owner,
      endpoint: h.endpoint ?? '',
      inputFileId: h.inputFileId ?? '',
      completionWindow: h.completionWindow ?? '',
      outputExpiresAfter: number(h.outputExpiresAfter),
      status: h.status as BatchStatus,
      metadata: h.metadata ? (JSON.parse(h.metadata) as Record<string, string>) : null,
      errors: h.errors ? (JSON.parse(h.errors) as BatchLineError[]) : null,
      outputFileId: h.outputFileId || null,
      errorFileId: h.errorFileId || null,
      createdAt: Number(h.createdAt),
      inProgressAt: number(h.inProgressAt),
      expiresAt: Number(h.expiresAt),
      finalizingAt: number(h.finalizingAt),
      completedAt: number(h.completedAt),
      failedAt: number(h.failedAt),
      expiredAt: number(h.expiredAt),
      cancellingAt: number(h.cancellingAt),
      cancelledAt: number(h.cancelledAt),
      total: Number(h.total ?? 0),
      completed: Number(h.completed ?? 0),
      failed: Number(h.failed ?? 0),
      inputTokens: Number(h.inputTokens ?? 0),
      // Replicas keep their place by chunks (chunkResults), not by a line.
      progress: { nextLine: 0, inputOffset: 0, outputBytes: 0, errorBytes: 0 },
    };
  }

  async batches(owner: string, page: Page): Promise<BatchRecord[]> {
    const ids = await this.page(batchesKey(owner), batchKey, { ...page, order: 'desc' });
    return (await Promise.all(ids.map((id) => this.batch(id)))).filter((batch) => batch !== undefined);
  }

  /**
   * Moves a batch to `status` (stamping its time) when it is in one of `only` (or not in one of
   * `unless`), setting `fields` with it; false when it was not.
   */
  async transition(
    id: string,
    status: BatchStatus,
    now: number,
    when: { only: BatchStatus[] } | { unless: BatchStatus[] },
    fields: Record<string, string | number> = {},
  ): Promise<boolean> {
    const [mode, list] = 'only' in when ? ['only', when.only] : ['unless', when.unless];
    const result = await this.redis.eval(
      transitionScript,
      2,
      batchKey(id),
      readersKey,
      status,
      statusTime[status] ?? '',
      String(now),
      mode,
      JSON.stringify(list),
      JSON.stringify(fields),
    );
    return result === 1;
  }

  /** Validation failed: the batch ends `failed` with the lines that failed it. */
  fail(id: string, errors: BatchLineError[], now: number): Promise<boolean> {
    return this.transition(
      id,
      'failed',
      now,
      { unless: [...finalList] as BatchStatus[] },
      {
        errors: JSON.stringify(errors),
      },
    );
  }

  /** Records a run of chunk `index`, unless one was: whether this one counts, and whether every chunk is done. */
  async chunkDone(id: string, index: number, result: ChunkResult): Promise<{ newly: boolean; all: boolean }> {
    const [newly, all] = (await this.redis.eval(
      chunkDoneScript,
      2,
      batchKey(id),
      chunksKey(id),
      String(index),
      JSON.stringify(result),
      String(result.completed),
      String(result.failed),
      String(result.inputTokens ?? 0),
    )) as [number, number];
    return { newly: newly === 1, all: all === 1 };
  }

  /** The recorded run of each finished chunk, by index. */
  async chunkResults(id: string): Promise<Map<number, ChunkResult>> {
    const h = await this.redis.hgetall(chunksKey(id));
    return new Map(Object.entries(h).map(([index, value]) => [Number(index), JSON.parse(value) as ChunkResult]));
  }

  /** How many chunks the batch was cut into (0 before validation). */
  async chunkCount(id: string): Promise<number> {
    return Number((await this.redis.hget(batchKey(id), 'chunks')) ?? 0);
  }

  /** Marks a batch whose window passed while it ran: it ends `expired`. */
  async markExpired(id: string): Promise<void> {
    await this.redis.hset(batchKey(id), 'expired', '1');
  }

  async isExpired(id: string): Promise<boolean> {
    return (await this.redis.hget(batchKey(id), 'expired')) === '1';
  }

  async setResultFiles(id: string, outputFileId: string | null, errorFileId: string | null): Promise<void> {
    await this.redis.hset(batchKey(id), { outputFileId: outputFileId ?? '', errorFileId: errorFileId ?? '' });
  }

  /** Drops a finished batch's chunk records. */
  async forgetChunks(id: string): Promise<void> {
    await this.redis.del(chunksKey(id));
  }

  /** Ids in a listing's sorted set, a page after the cursor. */
  private async page(key: string, recordKey: (id: string) => string, page: Page): Promise<string[]> {
    const after = page.after ? await this.redis.hget(recordKey(page.after), 'seq') : null;
    if (page.order === 'asc')
      return this.redis.zrangebyscore(key, after === null ? '-inf' : `(${after}`, '+inf', 'LIMIT', 0, page.limit);
    return this.redis.zrevrangebyscore(key, after === null ? '+inf' : `(${after}`, '-inf', 'LIMIT', 0, page.limit);
  }
}
