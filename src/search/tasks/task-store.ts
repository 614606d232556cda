/**
 * Where task records live. The embedded store is a SQLite file under the data dir, so finished
 * records survive restarts; with several replicas they live in Redis (redis-task-store.ts).
 */
import type { SqliteDatabase } from '../../sqlite.js';
import type { SearchOutcome, StoredTask, TaskError, TaskState } from '../types.js';

export interface TaskStore {
  insert(task: StoredTask): Promise<void>;
  get(id: string): Promise<StoredTask | undefined>;
  /** pending -> running; false when the task is no longer pending (cancelled meanwhile). */
  markRunning(id: string, at: number): Promise<boolean>;
  /** Records a final state; false when the task had already reached one. */
  finish(
    id: string,
    state: 'succeeded' | 'failed' | 'cancelled',
    at: number,
    outcome: SearchOutcome | null,
    error: TaskError | null,
  ): Promise<boolean>;
  /** Run times (ms) of the most recently finished tasks, newest first. */
  recentDurations(limit: number): Promise<number[]>;
  close(): Promise<void>;
}

/** A store that one process owns: it recovers its own queue after a restart and sweeps old records. */
export interface LocalTaskStore extends TaskStore {
  /** Ids of pending tasks, oldest first. */
  pendingIds(): Promise<string[]>;
  /** Marks every running task failed with `error` (after a restart nothing is running any more). */
  failRunning(at: number, error: TaskError): Promise<number>;
  /** Deletes tasks that finished before `cutoff`. */
  deleteFinishedBefore(cutoff: number): Promise<number>;
}

interface Row {
  id: string;
  owner: string;
  state: TaskState;
  request: string;
  created_at: number;
  started_at: number | null;
  finished_at: number | null;
  outcome: string | null;
  error: string | null;
}

function fromRow(row: Row): StoredTask {
  return {
    id: row.id,
    owner: row.owner,
    state: row.state,
    request: JSON.parse(row.request) as StoredTask['request'],
    createdAt: row.created_at,
    startedAt: row.started_at,
    finishedAt: row.finished_at,
    outcome: row.outcome === null ? null : (JSON.parse(row.outcome) as SearchOutcome),
    error: row.error === null ? null : (JSON.parse(row.error) as TaskError),
  };
}

export class SqliteTaskStore implements LocalTaskStore {
  private readonly statements;

  constructor(private readonly db: SqliteDatabase) {
    db.exec(`
      CREATE TABLE IF NOT EXISTS search_tasks (
        id TEXT PRIMARY KEY,
        owner TEXT NOT NULL,
        state TEXT NOT NULL,
        request TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        started_at INTEGER,
        finished_at INTEGER,
        outcome TEXT,
        error TEXT
      );
      CREATE INDEX IF NOT EXISTS search_tasks_state ON search_tasks (state, created_at);
      CREATE INDEX IF NOT EXISTS search_tasks_finished ON search_tasks (finished_at);
    `);
    this.statements = {
      insert: db.prepare(
        'INSERT INTO search_tasks (id, owner, state, request, created_at, started_at, finished_at, outcome, error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)',
      ),
      get: db.prepare<unknown[], Row>('SELECT * FROM search_tasks WHERE id = ?'),
      markRunning: db.prepare(
        "UPDATE search_tasks SET state = 'running', started_at = ? WHERE id = ? AND state = 'pending'",
      ),
      finish: db.prepare(
        "UPDATE search_tasks SET state = ?, finished_at = ?, outcome = ?, error = ? WHERE id = ? AND state IN ('pending', 'running')",
      ),
      pending: db.prepare<unknown[], { id: string }>(
        "SELECT id FROM search_tasks WHERE state = 'pending' ORDER BY created_at, rowid",
      ),
      failRunning: db.prepare(
        "UPDATE search_tasks SET state = 'failed', finished_at = ?, error = ? WHERE state = 'running'",
      ),
      deleteFinished: db.prepare('DELETE FROM search_tasks WHERE finished_at IS NOT NULL AND finished_at < ?'),
      durations: db.prepare<unknown[], { ms: number }>(
        'SELECT finished_at - started_at AS ms FROM search_tasks WHERE started_at IS NOT NULL AND finished_at IS NOT NULL ORDER BY finished_at DESC LIMIT ?',
      ),
    };
  }

  async insert(task: StoredTask): Promise<void> {
    this.statements.insert.run(
      task.id,
      task.owner,
      task.state,
      JSON.stringify(task.request),
      task.createdAt,
      task.startedAt,
      task.finishedAt,
      task.outcome === null ? null : JSON.stringify(task.outcome),
      task.error === null ? null : JSON.stringify(task.error),
    );
  }

  async get(id: string): Promise<StoredTask | undefined> {
    const row = this.statements.get.get(id);
    return row ? fromRow(row) : undefined;
  }

  async markRunning(id: string, at: number): Promise<boolean> {
    return this.statements.markRunning.run(at, id).changes === 1;
  }

  async finish(
    id: string,
    state: 'succeeded' | 'failed' | 'cancelled',
    at: number,
    outcome: SearchOutcome | null,
    error: TaskError | null,
  ): Promise<boolean> {
    const result = this.statements.finish.run(
      state,
      at,
      outcome === null ? null : JSON.stringify(outcome),
      error === null ? null : JSON.stringify(error),
      id,
    );
    return result.changes === 1;
  }

  async pendingIds(): Promise<string[]> {
    return this.statements.pending.all().map((row) => row.id);
  }

  async failRunning(at: number, error: TaskError): Promise<number> {
    return this.statements.failRunning.run(at, JSON.stringify(error)).changes;
  }

  async deleteFinishedBefore(cutoff: number): Promise<number> {
    return this.statements.deleteFinished.run(cutoff).changes;
  }

  async recentDurations(limit: number): Promise<number[]> {
    return this.statements.durations.all(limit).map((row) => row.ms);
  }

  async close(): Promise<void> {
    if (this.db.open) this.db.close();
  }
}
