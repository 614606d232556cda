/**
 * The exact-interface stand-ins of Hub models (scripts/standins/): generated once into
 * `.data/standins` by the suite's global setup, kept while the generator is unchanged.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { standinPython, writeStandins } from '../../src/cli/bench-standins.js';
import type { Catalogue } from '../../src/models/catalogue.js';
import { commitSha } from '../fixtures/hub-repos.js';

export const standinsHint =
  'needs python3 with numpy, sentencepiece, regex and Pillow (Debian: apt-get install python3-numpy python3-sentencepiece python3-regex python3-pil) and ../shared beside the checkout';

/** Writes the tiny stand-ins into `dir` (a no-op for those already current); returns why not, if it can not. */
export function generateStandins(dir: string): string | undefined {
  const shared = resolve('../shared');
  if (!standinPython() || !existsSync(join(shared, 'models', 'hub-files'))) return standinsHint;
  writeStandins([], dir, 'tiny', shared);
  return undefined;
}

/** The repo ids of the stand-in folders `<owner>/<name>` in `dir` that `keep` takes, sorted. */
function standinFolders(dir: string, keep: (folder: string) => boolean): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true })
    .filter((owner) => owner.isDirectory())
    .flatMap((owner) =>
      readdirSync(join(dir, owner.name), { withFileTypes: true })
        .filter((name) => name.isDirectory() && keep(join(dir, owner.name, name.name)))
        .map((name) => `${owner.name}/${name.name}`),
    )
    .sort();
}

/** The repo ids of the servable stand-ins in `dir` (folders holding a golden.json and a graph). */
export function listStandins(dir: string): string[] {
  return standinFolders(
    dir,
    (folder) =>
      existsSync(join(folder, 'golden.json')) &&
      ['onnx/model.onnx', 'model.onnx'].some((graph) => existsSync(join(folder, graph))),
  );
}

/** The repo ids of the text-and-image stand-ins in `dir` (golden.json of task `multimodal`; their graphs are named in it). */
export function listMultimodalStandins(dir: string): string[] {
  return standinFolders(dir, (folder) => {
    const golden = join(folder, 'golden.json');
    return existsSync(golden) && (JSON.parse(readFileSync(golden, 'utf8')) as { task: string }).task === 'multimodal';
  });
}

/** The commit the stand-in Hub serves a repository at: the catalogue's pin, else one of its own. */
export function standinCommit(catalogue: Catalogue, repo: string): string {
  const source = catalogue.get(repo)?.source;
  return (source?.kind === 'hub' ? source.revision : undefined) ?? commitSha(repo);
}
