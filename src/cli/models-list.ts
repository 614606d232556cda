/**
 * What the models dir holds, next to what the catalogue knows: for `onnx-gateway models list`.
 * A model is present when the registry could load it (config, tokenizer and a graph).
 */
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Catalogue, Manifest, Task } from '../models/catalogue.js';
import { formatBytes } from '../models/download-progress.js';
import { readModelFile, taskFromConfig as taskOfConfig } from '../models/facts.js';
import { ModelConfig, SentenceTransformersConfig } from '../models/file-schemas.js';
import { readLock, type ModelLock } from '../models/lock.js';
import { filesIn, modelDir, stagingDirOf } from '../models/paths.js';
import { variantsIn, type Variant } from '../models/variants.js';

export interface LocalModel {
  id: string;
  task: Task | 'unknown';
  /** `hub:owner/name@commit` (the locked commit, else the catalogue's pin), `generated`, or `local` for a folder no manifest names. */
  source: string;
  /** The commit the files are from, as the lock file says (pulled models only). */
  commit?: string;
  state: 'present' | 'missing' | 'incomplete';
  /** The graph variants on disk. */
  variants: Variant[];
  /** Bytes of every file in the model folder. */
  bytes: number;
  dir: string;
  /** A download broke off and can be resumed by pulling again. */
  partialDownload: boolean;
}

/**
 * Every catalogue model, then every other model folder in the models dir: `<owner>/<name>` for
 * pulled repositories, `<name>` for a folder of model files at the top.
 */
export function listLocalModels(catalogue: Catalogue, modelsDir: string): LocalModel[] {
  const models = catalogue
    .list()
    .map((manifest) => inspect(manifest.id, modelDir(modelsDir, manifest.id, catalogue), manifest));
  const known = new Set(models.map((m) => m.dir));
  const others: Array<{ id: string; dir: string }> = [];
  for (const top of subfolders(modelsDir)) {
    const dir = resolve(modelsDir, top);
    const inner = isModelFolder(dir) ? [] : subfolders(dir);
    if (inner.length === 0) others.push({ id: top, dir });
    for (const name of inner) others.push({ id: `${top}/${name}`, dir: join(dir, name) });
  }
  return [
    ...models,
    ...others.filter((other) => !known.has(other.dir)).map(({ id, dir }) => inspect(id, dir, undefined)),
  ];
}

function subfolders(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true })
    .filter((entry) => entry.isDirectory() && !entry.name.startsWith('.'))
    .map((entry) => entry.name)
    .sort();
}

/** A folder with model files of its own (not an owner's folder of repositories). */
function isModelFolder(dir: string): boolean {
  return readdirSync(dir, { withFileTypes: true }).some((entry) => entry.isFile() || entry.name === 'onnx');
}

function inspect(id: string, dir: string, manifest: Manifest | undefined): LocalModel {
  const variants = variantsIn(filesIn(dir)).map((found) => found.variant);
  const loadable =
    variants.length > 0 && ['config.json', 'tokenizer.json'].every((file) => existsSync(join(dir, file)));
  const state = loadable ? 'present' : existsSync(dir) ? 'incomplete' : 'missing';
  const lock = lockIn(dir);
  const source =
    manifest?.source.kind === 'generated'
      ? 'generated'
      : lock || manifest
        ? `hub:${lock?.repo ?? (manifest!.source as { repo: string }).repo}@${(lock?.commit ?? (manifest!.source as { revision?: string }).revision ?? 'main').slice(0, 7)}`
        : 'local';
  return {
    id,
    task: manifest?.task ?? taskFromConfig(dir),
    source,
    ...(lock ? { commit: lock.commit } : {}),
    state,
    variants,
    bytes: existsSync(dir) ? folderBytes(dir) : 0,
    dir,
    partialDownload: existsSync(stagingDirOf(dir)),
  };
}

function lockIn(dir: string): ModelLock | undefined {
  try {
    return readLock(dir);
  } catch {
    return undefined;
  }
}

/** As the registry decides for folders without a manifest. */
function taskFromConfig(dir: string): Task | 'unknown' {
  try {
    const config = readModelFile(join(dir, 'config.json'), ModelConfig);
    if (!config) return 'unknown';
    return taskOfConfig(
      config,
      readModelFile(join(dir, 'config_sentence_transformers.json'), SentenceTransformersConfig),
    );
  } catch {
    return 'unknown';
  }
}

function folderBytes(dir: string): number {
  let total = 0;
  for (const entry of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    if (entry.isFile()) total += statSync(join(entry.parentPath, entry.name)).size;
  }
  return total;
}

/** A plain-text table, one model a row. */
export function formatModelTable(models: LocalModel[]): string {
  const rows = [
    ['ID', 'TASK', 'SOURCE', 'STATE', 'VARIANTS', 'SIZE'],
    ...models.map((m) => [
      m.id,
      m.task,
      m.source,
      m.state + (m.partialDownload ? ' (partial download)' : ''),
      m.variants.join(',') || '-',
      m.bytes > 0 ? formatBytes(m.bytes) : '-',
    ]),
  ];
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => row[column]!.length)));
  return rows
    .map((row) =>
      row.map((cell, column) => (column === row.length - 1 ? cell : cell.padEnd(widths[column]!))).join('  '),
    )
    .join('\n');
}

/** docs/models.md's table of the catalogue's Hub models (`npm run docs`): one row a model, its facts and how it is checked here. */
export function catalogueTable(catalogue: Catalogue): string {
  const verified = { 'stand-in': 'stand-in golden', family: 'family stand-in', none: 'not here' } as const;
  const prompts = (m: Manifest) =>
    Object.entries(m.prompts ?? {})
      .map(([name, text]) => `${name}: \`${text.replace(/\n/g, '\\n')}\``)
      .join('<br>') || '-';
  const rows = catalogue
    .list()
    .filter((m) => m.source.kind === 'hub')
    .sort(
      (a, b) =>
        a.task.localeCompare(b.task) || (a.family ?? '').localeCompare(b.family ?? '') || a.id.localeCompare(b.id),
    )
    .map((m) => {
      const source = m.source as { repo: string; revision?: string };
      // The Matryoshka widths below the full one, and the card's step before a cut (#matryoshka-cuts).
      const cuts = [
        ...(m.matryoshkaDimensions ? [m.matryoshkaDimensions.filter((d) => d !== m.dimensions).join(', ')] : []),
        ...(m.beforeCut ? [`${m.beforeCut.step.replace('-', ' ')} before the cut`] : []),
      ];
      const width =
        m.task === 'embedding' ? `${m.dimensions ?? '?'}${cuts.length ? ` (${cuts.join('; ')})` : ''}` : '-';
      return [
        `[${source.repo}](https://huggingface.co/${source.repo}) \`${source.revision?.slice(0, 7) ?? 'main'}\``,
        m.task,
        m.family ?? '?',
        m.task === 'embedding'
          ? `${m.pooling ?? '?'}${m.normalize === false ? ', not normalised' : ''}`
          : m.task === 'classify'
            ? 'per-label scores'
            : 'logit',
        String(m.maxTokens ?? '?'),
        width,
        m.task === 'embedding' ? prompts(m) : '-',
        m.licence ?? '?',
        verified[m.verified ?? 'none'],
      ];
    });
  const header = [
    'model (revision)',
    'task',
    'family',
    'pooling',
    'window',
    'dimensions (Matryoshka)',
    'prompts',
    'licence',
    'verified',
  ];
  return [header, header.map(() => '---'), ...rows].map((row) => `| ${row.join(' | ')} |`).join('\n');
}
