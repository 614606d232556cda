/**
 * One local index for every replica, through Redis. Each replica keeps its own SQLite copy; every
 * write (add, replace, delete) is appended to one Redis stream, and every replica applies the
 * stream to its copy in order. The writer waits until its own copy has applied the entry, so a
 * client reads its writes on the replica it wrote through.
 *
 * - Entries are numbered: a script increments a counter and appends the entry with the number in
 *   one step, so a replica sees a gap (an entry it never read) and knows how far behind it is.
 * - Each entry is applied in one SQLite transaction together with its number (DocumentIndex
 *   applyEntry); a replica restarted later reads on from the last entry its copy applied.
 *   Operations are idempotent by document key, and an entry is never applied twice.
 * - The stream is kept short with snapshots: when it holds more than `streamLength` entries, one
 *   replica (holding a lock key) stores its whole copy as a snapshot (with the number of the last
 *   entry in it) and only then trims the entries before that one. A replica whose next entry is
 *   gone, new or long stopped, loads the snapshot and reads on from there. A snapshot never
 *   replaces a newer one, so the stream always continues where the snapshot ends.
 *
 * - An entry holds the operation, not the documents: an upsert stores each document (with its
 *   vectors) under its key in one hash, in the same step as it appends `upsert-stored` with the
 *   keys, and a delete drops the key from the hash. Redis holds one copy of each live document
 *   however often it is rewritten, not one per entry. A copy applying an older entry reads the
 *   document as it is now: a later entry for the key writes or deletes the same, so every copy
 *   still ends equal (a key missing from the hash was deleted by a later entry, and is skipped).
 *
 * Redis keys: onnx-gateway:index:stream (the entries: `sequence`, `operation` as JSON),
 * onnx-gateway:index:sequence (the counter), onnx-gateway:index:documents (hash: document key ->
 * its upsert), onnx-gateway:index:snapshot (hash: `id`, `sequence`, `data`, the SQLite file) and
 * onnx-gateway:index:snapshot-lock.
 */
import { randomUUID } from 'node:crypto';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { onAbort } from '../../abort.js';
import { ApiError } from '../../errors.js';
import { probeRedis, throttledErrorLog } from '../../redis.js';
import type { AppliedEntry, DocumentEncodings, DocumentIndex, IndexDocument } from './document-index.js';
import { applyOperation, upsertOperations, type IndexOperation, type IndexWriter, type WriteReport } from './writes.js';

type Applied = ReturnType<typeof applyOperation>;

const redisKeys = {
  stream: 'onnx-gateway:index:stream',
  sequence: 'onnx-gateway:index:sequence',
  documents: 'onnx-gateway:index:documents',
  snapshot: 'onnx-gateway:index:snapshot',
  lock: 'onnx-gateway:index:snapshot-lock',
};
/** Entries read per round. */
const readCount = 100;
/** How long one blocking read waits for new entries before looking again (and at `closed`). */
const blockMs = 1000;
/** How long a writer waits for its own copy to apply its entry. */
const applyTimeoutMs = 30_000;
const lockMs = 60_000;
/** Results of applied entries kept for their writers. */
const keptResults = 256;

/**
 * Stores or drops documents, numbers the entry and appends it, atomically. KEYS: stream, counter,
 * documents; ARGV: the operation, then 'set' and key, document pairs or 'drop' and keys.
 */
const appendScript = `
if ARGV[2] == 'set' then
  for i = 3, #ARGV, 2 do redis.call('HSET', KEYS[3], ARGV[i], ARGV[i + 1]) end
elseif ARGV[2] == 'drop' then
  for i = 3, #ARGV do redis.call('HDEL', KEYS[3], ARGV[i]) end
end
local sequence = redis.call('INCR', KEYS[2])
local id = redis.call('XADD', KEYS[1], '*', 'sequence', sequence, 'operation', ARGV[1])
return {id, sequence}
`;

export interface ReplicationOptions {
  /** Entries the stream may hold before a snapshot replaces the older ones. */
  streamLength: number;
  log?: { error(object: unknown, message: string): void; info?(object: unknown, message: string): void };
}

export interface ReplicationStatus {
  stream: string;
  /** The last entry this copy applied (null before the first). */
  lastAppliedId: string | null;
  lastAppliedSequence: number;
  /** Entries written to the stream so far. */
  headSequence: number;
  /** Entries written and not yet applied here. */
  behind: number;
  /** Time between the newest entry and the last applied one; 0 when caught up or before the first. */
  lagSeconds: number;
  /** Snapshots this replica loaded since it started. */
  snapshotsLoaded: number;
}

type StreamEntry = [id: string, fields: string[]];

/** Stream ids are `<milliseconds>-<n>`. */
function entryMs(id: string): number {
  return Number(id.split('-')[0]);
}

export class IndexReplication implements IndexWriter {
  private closed = false;
  /**
   * Resolves on close. A read pending while the reader reconnects is never settled by
   * `disconnect()` (ioredis flushes its queue only on a close event), so waits race this.
   */
  private readonly closing: Promise<null>;
  private stop!: () => void;
  private following: Promise<void> | undefined;
  private waiters: { sequence: number; settle: (error?: ApiError) => void }[] = [];
  /** What applying an entry did, kept for the writer waiting for it. */
  private readonly results = new Map<number, Applied>();
  private snapshotsLoaded = 0;
  private readonly scratchFile: string;

  private constructor(
    private readonly index: DocumentIndex,
    /** Commands; fails fast while Redis is away. */
    private readonly redis: Redis,
    /** The blocking reads of the stream; waits out outages. */
    private readonly reader: Redis,
    private readonly options: ReplicationOptions,
  ) {
    this.closing = new Promise((resolve) => (this.stop = () => resolve(null)));
    const dir = index.path === ':memory:' ? tmpdir() : dirname(index.path);
    this.scratchFile = join(dir, `.snapshot-${randomUUID()}.sqlite`);
    redis.defineCommand('appendIndexEntry', { numberOfKeys: 3, lua: appendScript });
  }

  /** Connects, catches up with the stream (loading the snapshot when needed) and follows it. */
  static async open(url: string, index: DocumentIndex, options: ReplicationOptions): Promise<IndexReplication> {
    await probeRedis(url);
    const onError = throttledErrorLog(options.log);
    const redis = new Redis(url, { maxRetriesPerRequest: 2 });
    const reader = new Redis(url, { maxRetriesPerRequest: null });
    redis.on('error', onError);
    reader.on('error', onError);
    const replication = new IndexReplication(index, redis, reader, options);
    try {
      while ((await replication.readOnce(0)) > 0);
    } catch (error) {
      // Serving goes on with the copy as it is, reported behind; following retries.
      options.log?.error(
        { err: error },
        'index replication: catching up with the stream failed; retrying while serving',
      );
    }
    replication.following = replication.follow();
    return replication;
  }

  async upsert(documents: IndexDocument[], encodings?: DocumentEncodings, signal?: AbortSignal): Promise<WriteReport> {
    const keys = documents.map((doc) => doc.key);
    const before = this.index.idsOf(keys);
    const stored = upsertOperations(documents, encodings).flatMap((operation, i) => [
      keys[i]!,
      JSON.stringify(operation),
    ]);
    const applied = await this.append({ op: 'upsert-stored', keys }, signal, ['set', ...stored]);
    if (applied) return applied;
    // Another process applied the entry to this same file first: count against the copy as it was.
    const after = this.index.idsOf(keys);
    const added = new Set(keys.filter((key) => !before.has(key))).size;
    return {
      added,
      updated: new Set(keys).size - added,
      ids: keys.map((key) => after.get(key)).filter((id) => id !== undefined),
    };
  }

  /** A key this copy does not have is not found, without a write. */
  async remove(key: string, signal?: AbortSignal): Promise<boolean> {
    if (!this.index.idsOf([key]).has(key)) return false;
    const applied = await this.append({ op: 'delete', keys: [key] }, signal, ['drop', key]);
    return applied ? applied.removed > 0 : true;
  }

  async status(): Promise<ReplicationStatus> {
    const applied = this.index.applied();
    let headSequence = applied?.sequence ?? 0;
    let headId: string | undefined;
    try {
      const [sequence, newest] = await Promise.all([
        this.redis.get(redisKeys.sequence),
        this.redis.xrevrange(redisKeys.stream, '+', '-', 'COUNT', 1),
      ]);
      headSequence = Math.max(headSequence, Number(sequence ?? 0));
      headId = newest[0]?.[0];
    } catch {
      // Redis away: report what this copy knows.
    }
    const behind = headSequence - (applied?.sequence ?? 0);
    return {
      stream: redisKeys.stream,
      lastAppliedId: applied?.id ?? null,
      lastAppliedSequence: applied?.sequence ?? 0,
      headSequence,
      behind,
      lagSeconds: behind > 0 && headId && applied ? Math.max(0, (entryMs(headId) - entryMs(applied.id)) / 1000) : 0,
      snapshotsLoaded: this.snapshotsLoaded,
    };
  }

  async close(): Promise<void> {
    this.closed = true;
    this.stop();
    this.reader.disconnect();
    await this.following;
    this.redis.disconnect();
  }

  /**
   * Appends an operation and waits until this copy has applied it; what applying it did here
   * (undefined when another process on the same file applied it).
   */
  private async append(
    operation: IndexOperation,
    signal: AbortSignal | undefined,
    documents: string[],
  ): Promise<Applied | undefined> {
    if (this.closed) throw new ApiError('shutting_down');
    let sequence: number;
    try {
      const reply = await (
        this.redis as Redis & { appendIndexEntry(...args: string[]): Promise<[string, number]> }
      ).appendIndexEntry(
        redisKeys.stream,
        redisKeys.sequence,
        redisKeys.documents,
        JSON.stringify(operation),
        ...documents,
      );
      sequence = Number(reply[1]);
    } catch (error) {
      throw new ApiError(
        'store_unavailable',
        `Index writes go through Redis, which is not reachable (${(error as Error).message}).`,
        { cause: error },
      );
    }
    return this.appliedThrough(sequence, signal);
  }

  private appliedThrough(sequence: number, signal?: AbortSignal): Promise<Applied | undefined> {
    if ((this.index.applied()?.sequence ?? 0) >= sequence) {
      const result = this.results.get(sequence);
      this.results.delete(sequence);
      return Promise.resolve(result);
    }
    return new Promise((resolve, reject) => {
      let stopListening = () => undefined as void;
      const timer = setTimeout(
        () =>
          waiter.settle(
            new ApiError(
              'timeout',
              `The write is in the stream but this replica has not applied it within ${applyTimeoutMs / 1000} s; it will be.`,
            ),
          ),
        applyTimeoutMs,
      );
      const waiter = {
        sequence,
        settle: (error?: ApiError) => {
          clearTimeout(timer);
          stopListening();
          this.waiters = this.waiters.filter((w) => w !== waiter);
          const result = this.results.get(sequence);
          this.results.delete(sequence);
          if (error) reject(error);
          else resolve(result);
        },
      };
      this.waiters.push(waiter);
      stopListening = onAbort(signal, () => waiter.settle(new ApiError('client_closed')));
    });
  }

  private async follow(): Promise<void> {
    while (!this.closed) {
      try {
        await this.readOnce(blockMs);
        await this.snapshotIfLong();
      } catch (error) {
        if (this.closed) return;
        this.options.log?.error({ err: error }, 'index replication: reading the stream failed; retrying');
        await Promise.race([sleep(1000), this.closing]);
      }
    }
  }

  /** Reads and applies the entries after the last applied one; returns how many it read. */
  private async readOnce(blockFor: number): Promise<number> {
    const after = this.index.applied()?.id ?? '0';
    const args: (string | number)[] = ['COUNT', readCount];
    if (blockFor > 0) args.push('BLOCK', blockFor);
    const read = (this.reader.xread as (...a: (string | number)[]) => Promise<[string, StreamEntry[]][] | null>)(
      ...args,
      'STREAMS',
      redisKeys.stream,
      after,
    );
    read.catch(() => undefined);
    const reply = await Promise.race([read, this.closing]);
    if (this.closed) return 0;
    const entries = reply?.[0]?.[1] ?? [];
    for (const [id, fields] of entries) {
      const entry = await this.readEntry(fields);
      if (this.applyEntry(id, entry) !== 'gap') continue;
      // Entries before this one were trimmed: the snapshot holds them.
      await this.loadSnapshot();
      if (this.applyEntry(id, await this.readEntry(fields)) === 'gap')
        throw new Error(`the snapshot ends before entry ${id}, the first left in the stream`);
    }
    if (entries.length === 0) await this.loadSnapshotIfAhead();
    this.wakeWaiters();
    return entries.length;
  }

  /** An entry's number and its operations: an `upsert-stored` becomes the upserts the document hash holds now. */
  private async readEntry(fields: string[]): Promise<{ sequence: number; operations: () => IndexOperation[] }> {
    const field = (name: string) => fields[fields.indexOf(name) + 1];
    const sequence = Number(field('sequence'));
    const text = field('operation') ?? 'null';
    const parse = (json: string) => JSON.parse(json) as IndexOperation;
    // Only the entry to apply next needs its documents; one already applied (or past a gap) is parsed when applied.
    if (sequence !== (this.index.applied()?.sequence ?? 0) + 1 || !text.includes('"upsert-stored"'))
      return { sequence, operations: () => [parse(text)] };
    const operation = parse(text);
    if (operation.op !== 'upsert-stored') return { sequence, operations: () => [operation] };
    const stored = operation.keys.length > 0 ? await this.redis.hmget(redisKeys.documents, ...operation.keys) : [];
    return { sequence, operations: () => stored.filter((json): json is string => json !== null).map(parse) };
  }

  /** 'gap' when entries between the last applied one and this one are missing. */
  private applyEntry(
    id: string,
    { sequence, operations }: { sequence: number; operations: () => IndexOperation[] },
  ): 'applied' | 'skipped' | 'gap' {
    const appliedSequence = this.index.applied()?.sequence ?? 0;
    if (sequence <= appliedSequence) return 'skipped';
    if (sequence > appliedSequence + 1) return 'gap';
    const result = this.index.applyEntry({ id, sequence } satisfies AppliedEntry, () => {
      const total = { added: 0, updated: 0, ids: [] as number[], removed: 0 };
      for (const operation of operations()) {
        const done = applyOperation(this.index, operation);
        total.added += done.added;
        total.updated += done.updated;
        total.ids.push(...done.ids);
        total.removed += done.removed;
      }
      return total;
    });
    if (!result) return 'skipped';
    // Kept a while for its writer, which may ask after the entry was applied.
    this.results.set(sequence, result);
    this.results.delete(sequence - keptResults);
    return 'applied';
  }

  /**
   * With nothing to read after the last applied entry, a snapshot newer than this copy means the
   * stream was trimmed past it (a new replica, or one stopped for long): load it.
   */
  private async loadSnapshotIfAhead(): Promise<void> {
    const sequence = Number((await this.redis.hget(redisKeys.snapshot, 'sequence')) ?? 0);
    if (sequence > (this.index.applied()?.sequence ?? 0)) await this.loadSnapshot();
  }

  private async loadSnapshot(): Promise<void> {
    const data = await this.redis.hgetBuffer(redisKeys.snapshot, 'data');
    if (!data) throw new Error('the stream was trimmed past this replica but there is no snapshot to load');
    const before = this.index.applied()?.sequence ?? 0;
    this.index.loadSnapshot(data, this.scratchFile);
    this.snapshotsLoaded++;
    const applied = this.index.applied();
    this.options.log?.info?.({ from: before, to: applied?.sequence }, 'index replication: loaded the snapshot');
  }

  /** When the stream is longer than allowed, one replica snapshots its copy and trims before it. */
  private async snapshotIfLong(): Promise<void> {
    if ((await this.redis.xlen(redisKeys.stream)) <= this.options.streamLength) return;
    const token = randomUUID();
    if ((await this.redis.set(redisKeys.lock, token, 'PX', lockMs, 'NX')) !== 'OK') return;
    try {
      const applied = this.index.applied();
      const existing = Number((await this.redis.hget(redisKeys.snapshot, 'sequence')) ?? 0);
      if (!applied || applied.sequence <= existing) return;
      const data = this.index.serialize();
      // The snapshot is stored before the entries it holds are trimmed, and only up to it.
      await this.redis.hset(redisKeys.snapshot, { id: applied.id, sequence: String(applied.sequence), data });
      await this.redis.xtrim(redisKeys.stream, 'MINID', applied.id);
    } finally {
      if ((await this.redis.get(redisKeys.lock)) === token) await this.redis.del(redisKeys.lock);
    }
  }

  private wakeWaiters(): void {
    const applied = this.index.applied()?.sequence ?? 0;
    for (const waiter of this.waiters.filter((w) => w.sequence <= applied)) waiter.settle();
  }
}
