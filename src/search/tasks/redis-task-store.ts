/**
 * Task records in Redis, for replicas that share them. One hash per task; the state changes are
 * Lua scripts, so two replicas can never both move a task out of the same state. A finished record
 * expires after the retention period; recent run times are a capped list.
 */
import type { Redis } from 'ioredis';
import type { TaskStore } from './task-store.js';
import type { SearchOutcome, StoredTask, TaskError, TaskState } from '../types.js';

const prefix = 'onnx-gateway:search:';
const taskKey = (id: string) => `${prefix}task:${id}`;
const durationsKey = `${prefix}durations`;
const durationsKept = 100;

/** pending -> running; 1 when it moved. */
const markRunningScript = `
if redis.call('HGET', KEYS[1], 'state') ~= 'pending' then return 0 end
redis.call('HSET', KEYS[1], 'state', 'running', 'startedAt', ARGV[1])
return 1`;

/** pending | running -> a final state, expiring after the retention; 1 when it moved. */
const finishScript = `
local state = redis.call('HGET', KEYS[1], 'state')
if state ~= 'pending' and state ~= 'running' then return 0 end
redis.call('HSET', KEYS[1], 'state', ARGV[1], 'finishedAt', ARGV[2], 'outcome', ARGV[3], 'error', ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
local started = redis.call('HGET', KEYS[1], 'startedAt')
if state == 'running' and started then
  redis.call('LPUSH', KEYS[2], tonumber(ARGV[2]) - tonumber(started))
  redis.call('LTRIM', KEYS[2], 0, tonumber(ARGV[6]) - 1)
end
return 1`;

const orNull = (value: string | undefined) => (value === undefined || value === '' ? null : value);

export class RedisTaskStore implements TaskStore {
  constructor(
    private readonly redis: Redis,
    private readonly retentionMs: number,
  ) {}

  async insert(task: StoredTask): Promise<void> {
    await this.redis.hset(taskKey(task.id), {
      owner: task.owner,
      state: task.state,
      request: JSON.stringify(task.request),
      createdAt: String(task.createdAt),
    });
  }

  async get(id: string): Promise<StoredTask | undefined> {
    const h = await this.redis.hgetall(taskKey(id));
    if (!h.state) return undefined;
    const startedAt = orNull(h.startedAt);
    const finishedAt = orNull(h.finishedAt);
    const outcome = orNull(h.outcome);
    const error = orNull(h.error);
    return {
      id,
      owner: h.owner ?? '',
      state: h.state as TaskState,
      request: JSON.parse(h.request ?? '{}') as StoredTask['request'],
      createdAt: Number(h.createdAt),
      startedAt: startedAt === null ? null : Number(startedAt),
      finishedAt: finishedAt === null ? null : Number(finishedAt),
      outcome: outcome === null ? null : (JSON.parse(outcome) as SearchOutcome),
      error: error === null ? null : (JSON.parse(error) as TaskError),
    };
  }

  /** Deletes a record (one whose job could not be queued). */
  async remove(id: string): Promise<void> {
    await this.redis.del(taskKey(id));
  }

  async markRunning(id: string, at: number): Promise<boolean> {
    return (await this.redis.eval(markRunningScript, 1, taskKey(id), String(at))) === 1;
  }

  async finish(
    id: string,
    state: 'succeeded' | 'failed' | 'cancelled',
    at: number,
    outcome: SearchOutcome | null,
    error: TaskError | null,
  ): Promise<boolean> {
    const result = await this.redis.eval(
      finishScript,
      2,
      taskKey(id),
      durationsKey,
      state,
      String(at),
      outcome === null ? '' : JSON.stringify(outcome),
      error === null ? '' : JSON.stringify(error),
      String(this.retentionMs),
      String(durationsKept),
    );
    return result === 1;
  }

  async recentDurations(limit: number): Promise<number[]> {
    return (await this.redis.lrange(durationsKey, 0, limit - 1)).map(Number);
  }

  async close(): Promise<void> {
    // The connection belongs to the task service, which closes it.
  }
}
