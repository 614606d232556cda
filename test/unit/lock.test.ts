/**
 * The lock file of a model folder lists the files a pull deletes when the next pull no longer has
 * them, and the graphs the registry opens: a path that leaves the folder is refused as the Hub's
 * listing is (a folder copied from elsewhere may carry any lock).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { LOCK_FILE, LockFileError, readLock } from '../../src/models/lock.js';

const dir = mkdtempSync(join(tmpdir(), 'onnx-gateway-lock-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function lockWith(files: string[], variants: Record<string, string> = { fp32: 'onnx/model.onnx' }) {
  const lock = {
    version: 1,
    repo: 'x/y',
    revision: 'main',
    commit: 'a'.repeat(40),
    variants,
    pulledAt: '2026-01-01T00:00:00Z',
    files: files.map((path) => ({ path, size: 1 })),
  };
  writeFileSync(join(dir, LOCK_FILE), JSON.stringify(lock));
}

describe('readLock', () => {
  it('reads a lock whose paths stay in the folder', () => {
    lockWith(['config.json', 'onnx/model.onnx']);
    expect(readLock(dir)?.files.map((file) => file.path)).toEqual(['config.json', 'onnx/model.onnx']);
  });

  it.each([
    ['../../.ssh/authorized_keys'],
    ['/etc/passwd'],
    ['onnx/../../x'],
    ['C:\\Windows\\x'],
    ['a//b'],
    ['./config.json'],
  ])('refuses a file %j', (path) => {
    lockWith(['config.json', path]);
    expect(() => readLock(dir)).toThrow(LockFileError);
    expect(() => readLock(dir)).toThrow(/not a path inside the model folder/);
  });

  it('refuses a variant graph outside the folder', () => {
    lockWith(['config.json'], { fp32: '../other/model.onnx' });
    expect(() => readLock(dir)).toThrow(/not a path inside the model folder/);
  });
});
