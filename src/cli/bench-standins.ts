/**
 * Stand-ins for `onnx-gateway bench --stand-in`: the exact architecture of a Hub model (its real
 * layer count, widths and vocabulary; random weights) written by the generator in
 * scripts/standins/, so the latency of an architecture can be measured before its weights are
 * downloaded. Needs a checkout (the generator is not part of the npm package) and python3 with
 * numpy, sentencepiece, regex and Pillow.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const generator = join(root, 'scripts', 'standins', 'make_standins.py');

/** One stand-in of each architecture family, the default of `--stand-in families`. */
export const familyStandins: Record<string, { repo: string; task: 'embedding' | 'rerank' }> = {
  bert: { repo: 'BAAI/bge-small-en-v1.5', task: 'embedding' },
  mpnet: { repo: 'sentence-transformers/all-mpnet-base-v2', task: 'embedding' },
  'xlm-roberta': { repo: 'intfloat/multilingual-e5-base', task: 'embedding' },
  'xlm-roberta 8k (bge-m3)': { repo: 'BAAI/bge-m3', task: 'embedding' },
  nomicbert: { repo: 'nomic-ai/nomic-embed-text-v1.5', task: 'embedding' },
  modernbert: { repo: 'Alibaba-NLP/gte-modernbert-base', task: 'embedding' },
  qwen3: { repo: 'onnx-community/Qwen3-Embedding-0.6B-ONNX', task: 'embedding' },
  'xlm-roberta reranker': { repo: 'BAAI/bge-reranker-base', task: 'rerank' },
  'modernbert reranker': { repo: 'Alibaba-NLP/gte-reranker-modernbert-base', task: 'rerank' },
};

/** The repos a `--stand-in` value names: `families` for one of each family, or repo ids separated by commas. */
export function standinRepos(value: string): Array<{ repo: string; task?: 'embedding' | 'rerank' }> {
  if (value === 'families') return Object.values(familyStandins);
  return value.split(',').map((repo) => ({
    repo: repo.trim(),
    task: Object.values(familyStandins).find((s) => s.repo === repo.trim())?.task,
  }));
}

const needs =
  'python3 with numpy, sentencepiece, regex and Pillow (Debian: apt-get install python3-numpy python3-sentencepiece python3-regex python3-pil; ONNX_GATEWAY_PYTHON picks the interpreter)';

/** A python that has what the generator imports (ONNX_GATEWAY_PYTHON, else python3, else Debian's), or undefined. */
export function standinPython(): string | undefined {
  const candidates = [process.env.ONNX_GATEWAY_PYTHON, 'python3', '/usr/bin/python3'].filter((c): c is string => !!c);
  return candidates.find(
    (python) => spawnSync(python, ['-c', 'import numpy, sentencepiece, regex, PIL'], { stdio: 'ignore' }).status === 0,
  );
}

/**
 * Writes stand-ins of `repos` (all when empty) under `dir`, each `<dir>/<owner>/<name>`, kept while
 * the generator is unchanged. `real`: the real sizes, without golden outputs (bench); `tiny`: small
 * ones with golden outputs (tests). `shared` is the project's shared resources (real tokenizer files).
 */
export function writeStandins(
  repos: string[],
  dir: string,
  size: 'real' | 'tiny',
  shared = resolve(root, '..', 'shared'),
): void {
  if (!existsSync(generator))
    throw new Error(
      `The stand-in generator (${generator}) is part of a checkout of the repository, not of the package.`,
    );
  const python = standinPython();
  if (!python) throw new Error(`Generating stand-ins needs ${needs}.`);
  const args = [
    generator,
    '--out',
    dir,
    '--size',
    size,
    '--shared',
    shared,
    ...(repos.length > 0 ? ['--only', repos.join(',')] : []),
    ...(size === 'real' ? ['--no-golden'] : []),
  ];
  const run = spawnSync(python, args, { stdio: ['ignore', size === 'real' ? 'inherit' : 'ignore', 'inherit'] });
  if (run.error || run.status !== 0)
    throw new Error(`Generating the stand-ins failed (${run.error?.message ?? `exit ${run.status}`}).`);
}
