/**
 * The records of files and batches in one SQLite file under the data dir. Every change of a batch
 * is one statement (one transaction), so a process killed at any point leaves a record that says
 * exactly what was on disk when it last committed.
 */
import type { SqliteDatabase } from '../sqlite.js';
import type { BatchLineError, BatchProgress, BatchRecord, BatchStatus, FilePurpose, FileRecord } from './types.js';

interface FileRow {
  id: string;
  owner: string;
  purpose: string;
  filename: string;
  bytes: number;
  created_at: number;
  expires_at: number | null;
}

interface BatchRow {
  id: string;
  owner: string;
  endpoint: string;
  input_file_id: string;
  completion_window: string;
  output_expires_after: number | null;
  status: string;
  metadata: string | null;
  errors: string | null;
  output_file_id: string | null;
  error_file_id: string | null;
  created_at: number;
  in_progress_at: number | null;
  expires_at: number;
  finalizing_at: number | null;
  completed_at: number | null;
  failed_at: number | null;
  expired_at: number | null;
  cancelling_at: number | null;
  cancelled_at: number | null;
  total: number;
  completed: number;
  failed: number;
  input_tokens: number;
  next_line: number;
  input_offset: number;
  output_bytes: number;
  error_bytes: number;
}

/** The time column each status sets when a batch enters it. */
const statusTime: Partial<Record<BatchStatus, string>> = {
  in_progress: 'in_progress_at',
  finalizing: 'finalizing_at',
  completed: 'completed_at',
  failed: 'failed_at',
  expired: 'expired_at',
  cancelling: 'cancelling_at',
  cancelled: 'cancelled_at',
};

/** A page of a listing: newest first, after the item `after` (a cursor, as OpenAI's lists take). */
export interface Page {
  limit: number;
  after?: string;
  order?: 'asc' | 'desc';
}

export class BatchStore {
  constructor(private readonly db: SqliteDatabase) {
    db.exec(`
      CREATE TABLE IF NOT EXISTS files (
        id TEXT PRIMARY KEY,
        owner TEXT NOT NULL,
        purpose TEXT NOT NULL,
        filename TEXT NOT NULL,
        bytes INTEGER NOT NULL,
        created_at INTEGER NOT NULL,
        seq INTEGER NOT NULL
      );
      CREATE INDEX IF NOT EXISTS files_owner ON files (owner, seq);
      CREATE TABLE IF NOT EXISTS batches (
        id TEXT PRIMARY KEY,
        owner TEXT NOT NULL,
        endpoint TEXT NOT NULL,
        input_file_id TEXT NOT NULL,
        completion_window TEXT NOT NULL,
        status TEXT NOT NULL,
        metadata TEXT,
        errors TEXT,
        output_file_id TEXT,
        error_file_id TEXT,
        created_at INTEGER NOT NULL,
        in_progress_at INTEGER,
        expires_at INTEGER NOT NULL,
        finalizing_at INTEGER,
        completed_at INTEGER,
        failed_at INTEGER,
        expired_at INTEGER,
        cancelling_at INTEGER,
        cancelled_at INTEGER,
        total INTEGER NOT NULL DEFAULT 0,
        completed INTEGER NOT NULL DEFAULT 0,
        failed INTEGER NOT NULL DEFAULT 0,
        next_line INTEGER NOT NULL DEFAULT 0,
        input_offset INTEGER NOT NULL DEFAULT 0,
        output_bytes INTEGER NOT NULL DEFAULT 0,
        error_bytes INTEGER NOT NULL DEFAULT 0,
        seq INTEGER NOT NULL
      );
      CREATE INDEX IF NOT EXISTS batches_owner ON batches (owner, seq);
    `);
    // Columns added since the first release: a database made before gains them.
    addColumn(db, 'files', 'expires_at INTEGER');
    addColumn(db, 'batches', 'output_expires_after INTEGER');
    addColumn(db, 'batches', 'input_tokens INTEGER NOT NULL DEFAULT 0');
    db.exec('CREATE INDEX IF NOT EXISTS files_expiry ON files (expires_at) WHERE expires_at IS NOT NULL');
  }

  close(): void {
    this.db.close();
  }

  // Files.

  /** Inserts a file's record; inserting the same id again changes nothing (a finalize run twice). */
  insertFile(file: FileRecord): void {
    this.db
      .prepare(
        `INSERT OR IGNORE INTO files (id, owner, purpose, filename, bytes, created_at, expires_at, seq)
         VALUES (?, ?, ?, ?, ?, ?, ?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM files))`,
      )
      .run(file.id, file.owner, file.purpose, file.filename, file.bytes, file.createdAt, file.expiresAt);
  }

  /** Files whose time has come at `now` and that no unfinished batch reads. */
  expiredFiles(now: number): string[] {
    return (
      this.db
        .prepare(
          `SELECT id FROM files WHERE expires_at IS NOT NULL AND expires_at <= ? AND id NOT IN
             (SELECT input_file_id FROM batches WHERE status NOT IN ('failed', 'completed', 'expired', 'cancelled'))`,
        )
        .all(now) as { id: string }[]
    ).map((row) => row.id);
  }

  file(id: string): FileRecord | undefined {
    const row = this.db.prepare('SELECT * FROM files WHERE id = ?').get(id) as FileRow | undefined;
    return row && fileFromRow(row);
  }

  files(owner: string, page: Page, purpose?: string): FileRecord[] {
    const order = page.order === 'asc' ? 'ASC' : 'DESC';
    const after = page.after
      ? (this.db.prepare('SELECT seq FROM files WHERE id = ? AND owner = ?').get(page.after, owner) as
          { seq: number } | undefined)
      : undefined;
    const rows = this.db
      .prepare(
        `SELECT * FROM files WHERE owner = ? AND (? IS NULL OR purpose = ?)
         AND (? IS NULL OR seq ${order === 'DESC' ? '<' : '>'} ?) ORDER BY seq ${order} LIMIT ?`,
      )
      .all(owner, purpose ?? null, purpose ?? null, after?.seq ?? null, after?.seq ?? null, page.limit) as FileRow[];
    return rows.map(fileFromRow);
  }

  deleteFile(id: string): boolean {
    return this.db.prepare('DELETE FROM files WHERE id = ?').run(id).changes > 0;
  }

  /** Whether a batch that has not finished reads the file (it may not be deleted under it). */
  fileInUse(id: string): boolean {
    return (
      this.db
        .prepare(
          `SELECT 1 FROM batches WHERE input_file_id = ? AND status NOT IN ('failed', 'completed', 'expired', 'cancelled')`,
        )
        .get(id) !== undefined
    );
  }

  // Batches.

  insertBatch(batch: BatchRecord): void {
    this.db
      .prepare(
        `INSERT INTO batches (id, owner, endpoint, input_file_id, completion_window, output_expires_after, status,
           metadata, created_at, expires_at, seq)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM batches))`,
      )
      .run(
        batch.id,
        batch.owner,
        batch.endpoint,
        batch.inputFileId,
        batch.completionWindow,
        batch.outputExpiresAfter ?? null,
        batch.status,
        batch.metadata ? JSON.stringify(batch.metadata) : null,
        batch.createdAt,
        batch.expiresAt,
      );
  }

  batch(id: string): BatchRecord | undefined {
    const row = this.db.prepare('SELECT * FROM batches WHERE id = ?').get(id) as BatchRow | undefined;
    return row && batchFromRow(row);
  }

  batches(owner: string, page: Page): BatchRecord[] {
    const after = page.after
      ? (this.db.prepare('SELECT seq FROM batches WHERE id = ? AND owner = ?').get(page.after, owner) as
          { seq: number } | undefined)
      : undefined;
    const rows = this.db
      .prepare('SELECT * FROM batches WHERE owner = ? AND (? IS NULL OR seq < ?) ORDER BY seq DESC LIMIT ?')
      .all(owner, after?.seq ?? null, after?.seq ?? null, page.limit) as BatchRow[];
    return rows.map(batchFromRow);
  }

  /** Ids of the batches that have not finished, oldest first: what a start resumes. */
  unfinished(): string[] {
    return (
      this.db
        .prepare(
          `SELECT id FROM batches WHERE status NOT IN ('failed', 'completed', 'expired', 'cancelled') ORDER BY seq`,
        )
        .all() as { id: string }[]
    ).map((row) => row.id);
  }

  /**
   * Moves a batch to `status` (stamping its time) unless it is already in one of `unless`;
   * false when it was. A batch being cancelled is never moved back to running by a late writer.
   */
  setStatus(id: string, status: BatchStatus, now: number, unless: BatchStatus[] = []): boolean {
    const column = statusTime[status];
    const placeholders = unless.map(() => '?').join(', ');
    return (
      this.db
        .prepare(
          `UPDATE batches SET status = ?${column ? `, ${column} = COALESCE(${column}, ?)` : ''}
           WHERE id = ?${unless.length > 0 ? ` AND status NOT IN (${placeholders})` : ''}`,
        )
        .run(status, ...(column ? [now] : []), id, ...unless).changes > 0
    );
  }

  /** Validation failed: the batch ends `failed` with the lines that failed it. */
  fail(id: string, errors: BatchLineError[], now: number): void {
    this.db
      .prepare(`UPDATE batches SET status = 'failed', failed_at = ?, errors = ? WHERE id = ?`)
      .run(now, JSON.stringify(errors), id);
  }

  /** Validation passed: how many requests the batch has; it runs from the first line. */
  startRun(id: string, total: number, now: number): boolean {
    return (
      this.db
        .prepare(
          `UPDATE batches SET status = 'in_progress', in_progress_at = ?, total = ? WHERE id = ? AND status = 'validating'`,
        )
        .run(now, total, id).changes > 0
    );
  }

  /** A stretch of answers is on disk: where the run stands now, and the counts (its successes' input tokens too). */
  commit(id: string, progress: BatchProgress, completed: number, failed: number, inputTokens = 0): void {
    this.db
      .prepare(
        `UPDATE batches SET next_line = ?, input_offset = ?, output_bytes = ?, error_bytes = ?,
           completed = completed + ?, failed = failed + ?, input_tokens = input_tokens + ? WHERE id = ?`,
      )
      .run(
        progress.nextLine,
        progress.inputOffset,
        progress.outputBytes,
        progress.errorBytes,
        completed,
        failed,
        inputTokens,
        id,
      );
  }

  /** The batch's output and error files, once they are files of the API. */
  setResultFiles(id: string, outputFileId: string | null, errorFileId: string | null): void {
    this.db
      .prepare('UPDATE batches SET output_file_id = ?, error_file_id = ? WHERE id = ?')
      .run(outputFileId, errorFileId, id);
  }
}

function fileFromRow(row: FileRow): FileRecord {
  return {
    id: row.id,
    owner: row.owner,
    purpose: row.purpose as FilePurpose,
    filename: row.filename,
    bytes: row.bytes,
    createdAt: row.created_at,
    expiresAt: row.expires_at ?? null,
  };
}

function batchFromRow(row: BatchRow): BatchRecord {
  return {
    id: row.id,
    owner: row.owner,
    endpoint: row.endpoint,
    inputFileId: row.input_file_id,
    completionWindow: row.completion_window,
    outputExpiresAfter: row.output_expires_after ?? null,
    status: row.status as BatchStatus,
    metadata: row.metadata ? (JSON.parse(row.metadata) as Record<string, string>) : null,
    errors: row.errors ? (JSON.parse(row.errors) as BatchLineError[]) : null,
    outputFileId: row.output_file_id,
    errorFileId: row.error_file_id,
    createdAt: row.created_at,
    inProgressAt: row.in_progress_at,
    expiresAt: row.expires_at,
    finalizingAt: row.finalizing_at,
    completedAt: row.completed_at,
    failedAt: row.failed_at,
    expiredAt: row.expired_at,
    cancellingAt: row.cancelling_at,
    cancelledAt: row.cancelled_at,
    total: row.total,
    completed: row.completed,
    failed: row.failed,
    inputTokens: row.input_tokens,
    progress: {
      nextLine: row.next_line,
      inputOffset: row.input_offset,
      outputBytes: row.output_bytes,
      errorBytes: row.error_bytes,
    },
  };
}

/** Adds a column (`name TYPE`) to a table unless it has it. */
function addColumn(db: SqliteDatabase, table: string, column: string): void {
  const name = column.split(' ')[0]!;
  const columns = db.prepare(`PRAGMA table_info(${table})`).all() as { name: string }[];
  if (!columns.some((c) => c.name === name)) db.exec(`ALTER TABLE ${table} ADD COLUMN ${column}`);
}
