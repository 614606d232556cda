/**
 * Which files of a Hub repository a pull takes: the model's configuration, tokenizer and
 * sentence-transformers pipeline files that exist, and one ONNX graph per variant with its
 * external-data files; weights in other formats, READMEs and other variants are left on the Hub.
 * And what a pull says when the repository has no graph to take.
 */
import {
  externalDataFiles,
  findTowerGraphs,
  findVariantGraph,
  variantCandidates,
  variantsIn,
  type Variant,
} from './variants.js';

/** Taken when present. */
export const METADATA_FILES = [
  'config.json',
  'tokenizer.json',
  'tokenizer_config.json',
  'special_tokens_map.json',
  'modules.json',
  'sentence_bert_config.json',
  'config_sentence_transformers.json',
  // Image-text models: how their images are resized, cropped and normalised.
  'preprocessor_config.json',
] as const;

/** The `config.json` of each module modules.json names (`1_Pooling/config.json`, `2_Dense/config.json`, ...). */
export function moduleConfigFiles(modules: unknown): string[] {
  if (!Array.isArray(modules)) return [];
  return modules
    .map((module: { path?: unknown }) => module?.path)
    .filter((path): path is string => typeof path === 'string' && path !== '' && isSafePath(path))
    .map((path) => `${path.replace(/\/+$/, '')}/config.json`);
}

/**
 * The graph of a variant and its external-data files, or undefined when the listing has no such
 * graph. A two-tower export's graph is its text tower; `towers` then holds the vision tower's
 * graph too, fetched with it (its data files are in `data`).
 */
export function variantFiles(
  variant: Variant,
  paths: string[],
): { graph: string; towers: string[]; data: string[] } | undefined {
  const towers = findTowerGraphs(variant, paths);
  if (towers) {
    const data = [...externalDataFiles(towers.text, paths), ...externalDataFiles(towers.vision, paths)];
    return { graph: towers.text, towers: [towers.vision], data };
  }
  const graph = findVariantGraph(variant, paths);
  return graph ? { graph, towers: [], data: externalDataFiles(graph, paths) } : undefined;
}

/** A path that stays inside the model folder. */
export function isSafePath(path: string): boolean {
  return (
    !path.startsWith('/') &&
    !/^[A-Za-z]:/.test(path) &&
    !path.split(/[\\/]/).some((part) => part === '..' || part === '.' || part === '')
  );
}

interface Where {
  /** The id the user asked for (catalogue or repository id), for commands to copy. */
  id: string;
  repo: string;
  commit: string;
  /** The model folder, where an export should go. */
  dir: string;
}

/**
 * The refusal for a repository without any ONNX file: the Optimum export command, or, when the
 * architecture needs the repository's own Python code (config.json `auto_map`), that it does.
 */
export function noOnnxRefusal({ repo, commit, dir }: Where, config: Record<string, unknown> | undefined): string {
  const architectures = Array.isArray(config?.architectures) ? (config.architectures as string[]) : [];
  // A causal LM (Qwen3-Reranker, bge-reranker-v2-gemma) is exported with its LM head and cache, as the yes/no rerankers read it.
  const task = architectures.some((a) => a.endsWith('ForSequenceClassification'))
    ? 'text-classification'
    : architectures.some((a) => a.endsWith('ForCausalLM'))
      ? 'text-generation-with-past'
      : 'feature-extraction';
  const at = `${repo} at commit ${commit.slice(0, 7)}`;
  const autoMap = config?.auto_map;
  if (autoMap && typeof autoMap === 'object') {
    const classes = Object.entries(autoMap as Record<string, unknown>)
      .map(([auto, target]) => `${auto} -> ${String(target)}`)
      .join(', ');
    return (
      `${at} ships no ONNX file, and its architecture${architectures.length > 0 ? ` (${architectures.join(', ')})` : ''} needs the repository's own ` +
      `Python code (config.json auto_map: ${classes}). This server runs ONNX graphs only and can not run or export that code. ` +
      `Look for a repository with an ONNX export of this model, or export one where its code can run ` +
      `(optimum-cli export onnx --model ${repo} --trust-remote-code --task ${task} ${dir}, if Optimum has an ONNX config for the architecture).`
    );
  }
  return (
    `${at} has no ONNX export (no .onnx file), and this server runs ONNX graphs only. Export one with Optimum into the model's folder:\n` +
    `  optimum-cli export onnx --model ${repo} --task ${task} ${dir}\n` +
    `and the server serves that folder as "${repo}".`
  );
}

/** The refusal for a variant the repository lacks: the variants it has, or the ONNX files it has when none is a known variant. */
export function missingVariantRefusal({ id, repo, commit }: Where, variant: Variant, paths: string[]): string {
  const at = `${repo} at commit ${commit.slice(0, 7)}`;
  const present = variantsIn(paths);
  const looked = `looked for ${variantCandidates(variant).join(', ')}`;
  const quantize =
    variant === 'int8'
      ? ` To make an int8 graph from the fp32 one instead: onnx-gateway models pull ${id} --variant fp32, then onnx-gateway models quantize ${id}.`
      : '';
  if (present.length === 0) {
    const onnx = paths.filter((path) => path.endsWith('.onnx'));
    return (
      `${at} has no ${variant} graph (${looked}), and none of its ONNX files (${onnx.join(', ')}) is a variant this server knows ` +
      `(fp32: onnx/model.onnx or model.onnx; fp16, int8, O1-O4: onnx/model_<variant>.onnx).${quantize}`
    );
  }
  return (
    `${at} has no ${variant} graph (${looked}). Its ONNX variants: ${present.map((p) => `${p.variant} (${p.graph})`).join(', ')}. ` +
    `Pull one with --variant <name> (served as "${id}:<name>").${quantize}`
  );
}
