/**
 * Opens the embedded SQLite files of the server (search task records, the local index, batches).
 */
import { mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import type BetterSqlite3 from 'better-sqlite3';

export type SqliteDatabase = BetterSqlite3.Database;

/**
 * better-sqlite3 13 (Node-API, its binaries in the package) on Node 22 and later; 12, built for
 * node's own ABI, on Node 20, where 13 crashes as it opens a database. 12 can not serve Node 24:
 * from 24.19 node asserts when a garbage collection outside JavaScript frees one of its statements.
 */
const Database = createRequire(import.meta.url)(
  Number(process.versions.node.split('.')[0]) >= 22 ? 'better-sqlite3' : 'better-sqlite3-12',
) as typeof BetterSqlite3;

/** Opens (creating folders as needed) a database in WAL mode, so readers never wait for a writer. */
export function openDatabase(path: string): SqliteDatabase {
  if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
  const db = new Database(path, { timeout: 5000 });
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.pragma('foreign_keys = ON');
  return db;
}
