/**
 * Test inputs that take seconds to make (reference outputs of the python scripts, int8 graphs):
 * made once into `.data/made-once/` and kept while what they are made from is unchanged, so the
 * next run of the suite (CI's run on another Node.js, the next local run) finds them made.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';

/** The sha256 of the files named (a folder: every file under it), their paths relative to `root` included. */
export function digestOf(paths: string[], root = resolve('.')): string {
  const hash = createHash('sha256');
  const add = (path: string) => {
    if (statSync(path).isDirectory()) {
      for (const entry of readdirSync(path).sort()) {
        if (entry !== '__pycache__' && entry !== 'node_modules') add(join(path, entry));
      }
      return;
    }
    hash.update(relative(root, path)).update('\0').update(readFileSync(path)).update('\0');
  };
  for (const path of paths) add(path);
  return hash.digest('hex');
}

/**
 * The folder `.data/made-once/<name>-<digest>`, made by `make` (into a scratch folder, then renamed,
 * so a run cut short leaves nothing half made) unless a run before made it from the same sources.
 * `sources` are the files and folders what is made depends on, scripts and inputs alike;
 * `versions`, those of the tools that make it, where their output may change with them. Making a
 * new one removes those made from older sources.
 */
export async function madeOnce(
  what: { name: string; sources: string[]; versions?: string },
  make: (dir: string) => void | Promise<void>,
): Promise<string> {
  const { name, sources, versions = '' } = what;
  const parent = resolve('.data', 'made-once');
  const digest = createHash('sha256').update(digestOf(sources)).update(versions).digest('hex');
  const dir = join(parent, `${name}-${digest.slice(0, 16)}`);
  if (existsSync(dir)) return dir;
  const scratch = `${dir}.tmp-${process.pid}`;
  rmSync(scratch, { recursive: true, force: true });
  mkdirSync(scratch, { recursive: true });
  try {
    await make(scratch);
    renameSync(scratch, dir);
    for (const entry of readdirSync(parent)) {
      if (
        /^[0-9a-f]{16}$/.test(entry.slice(name.length + 1)) &&
        entry.startsWith(`${name}-`) &&
        join(parent, entry) !== dir
      )
        rmSync(join(parent, entry), { recursive: true, force: true });
    }
  } catch (error) {
    rmSync(scratch, { recursive: true, force: true });
    // Another run made it meanwhile: theirs is as good.
    if (existsSync(dir)) return dir;
    throw error;
  }
  return dir;
}
