/**
 * What a model folder's own files say about how to serve it, read once at start (and after a pull,
 * to refuse a model that could not be served exactly): the task, the window, the pooling,
 * normalisation and prompts of its sentence-transformers configuration, the reranker's scoring
 * head, the classifier's activation, and which inputs and output of its ONNX graph to use.
 *
 * The files have the last word; a manifest may add what the files do not say (a model's documented
 * prefixes) but never contradicts them. Anything that would make the served vectors differ from
 * sentence-transformers is refused with a message that says what to do.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Static, TSchema } from 'typebox';
import { Value } from 'typebox/value';
import { StartupError } from '../errors.js';
import { readGraphInterface, type ElementType, type TensorInfo } from '../onnx/interface.js';
import { poolings, type Pooling } from '../vectors/pooling.js';
import {
  DenseConfig,
  ModelConfig,
  PoolingConfig,
  SentenceBertConfig,
  SentenceTransformersConfig,
  SpladePoolingConfig,
  StModules,
  TokenizerConfig,
} from './file-schemas.js';
import {
  checkSpladePooling,
  isLateInteraction,
  isSplade,
  lastDim,
  lateInteractionFacts,
  tokenWeightsOutput,
  type LateInteractionFacts,
  type ModelHeads,
} from './heads.js';
import { rerankTemplates, yesNoRerankerOf, type YesNoFacts } from './yes-no-rerankers.js';
import { isMultimodal, readMultimodalFacts, type MultimodalFacts } from './multimodal.js';

export type Task = 'embedding' | 'rerank' | 'classify';

/** The tasks whose graph ends in a sequence-classification head: they read `logits` [rows, labels]. */
const headTasks: readonly Task[] = ['rerank', 'classify'];

export class ModelFilesError extends StartupError {
  override name = 'ModelFilesError';
  readonly code = 'model_files';
}

/** How a reranker's logits become a relevance score in (0, 1). */
export type RerankScoring = { kind: 'sigmoid' } | { kind: 'softmax'; positive: number; labels: number };

/**
 * How a classifier's logits become per-label scores, as transformers' text-classification pipeline
 * decides it: `problem_type` regression gives the raw logit, multi_label_classification (or a
 * single label) a sigmoid per label, anything else a softmax over the labels.
 */
export type ClassifyActivation = 'softmax' | 'sigmoid' | 'none';

/** The graph inputs the worker feeds, beside `input_ids` and `attention_mask`. */
export interface GraphFeeds {
  /** Element type of the id inputs (int64 in every export seen; int32 accepted). */
  idType: 'int64' | 'int32';
  tokenTypeIds: boolean;
  /** Decoders: positions 0..length-1 of each right-padded row. */
  positionIds: boolean;
  /** Decoder exports with a cache: fed empty (no past), shape `[batch, heads, 0, headDim]`. */
  pastKeyValues: Array<{ name: string; type: ElementType; shape: Array<number | string | null> }>;
  /** Whether the graph takes `attention_mask` (absent: it does; some image-text text towers do not). */
  attentionMask?: boolean;
  /** Every row padded to this length with the pad id, as the model was trained (SigLIP's text tower). */
  fixedLength?: number;
  /** Rows of one length only in a batch: without an attention mask, padding would change the vectors. */
  uniformLength?: boolean;
  /** A joint image-text graph run for texts: `pixel_values` fed zeros of this size (multimodal.ts). */
  pixelDummy?: { type: 'float32' | 'float16'; height: number; width: number; batchMatched: boolean };
}

export interface ModelFacts {
  task: Task;
  /** config.json's `model_type` (bert, xlm-roberta, qwen3, ...). */
  family: string;
  /** Longest sequence the model takes, special tokens included. */
  maxTokens: number;
  /** Width of the vectors (embedders), or of the logits (rerankers). */
  width: number;
  /** How token vectors become one vector; unused when the graph pools itself (`sentence_embedding`). */
  pooling: Pooling;
  normalize: boolean;
  /** sentence-transformers prompts by name, and the one applied when a request names none. */
  prompts: Record<string, string>;
  defaultPromptName?: string;
  rerankScoring: RerankScoring;
  /** How a classifier's logits become scores (unused by other tasks). */
  activation: ClassifyActivation;
  /** Which of pooling, normalisation and prompts the files state (the others are defaults). */
  declared: { pooling: boolean; normalize: boolean; prompts: boolean };
  /** Class labels by index (rerankers, classifiers): config.json's `id2label`, else LABEL_0, LABEL_1, .... */
  id2label: Record<string, string>;
  vocabSize: number;
  output: { name: string; pooled: boolean; type: ElementType };
  /** The kinds of output the model gives (heads.ts): dense, sparse, token vectors. */
  heads: ModelHeads;
  /** A ColBERT model's query and document encoding. */
  lateInteraction?: LateInteractionFacts;
  feeds: GraphFeeds;
  /** Files beside the graph that hold its weights (external data), relative to the graph's folder. */
  externalData: string[];
  /** A reranker scored by the logits of its answer tokens, with its template (yes-no-rerankers.ts). */
  yesNo?: YesNoFacts;
  /** An image-text model (CLIP, SigLIP, jina-clip): its vision tower and image processor; the rest is its text tower's. */
  multimodal?: MultimodalFacts;
}

/**
 * A JSON file of the model folder, checked against its schema (file-schemas.ts); undefined when the
 * folder has no such file. A value of the wrong type is refused, naming the file and the field.
 */
export function readModelFile<S extends TSchema>(path: string, schema: S): Static<S> | undefined {
  if (!existsSync(path)) return undefined;
  let value: unknown;
  try {
    // A null is absent, as the Python that wrote the file means it (None).
    value = JSON.parse(readFileSync(path, 'utf8'), (_key, item: unknown) => (item === null ? undefined : item));
  } catch (error) {
    throw new ModelFilesError(`${path} is not valid JSON: ${(error as Error).message}`);
  }
  const errors = [...Value.Errors(schema, value)];
  if (errors.length === 0) return value as Static<S>;
  // The outermost failure: where a value may take several forms, the union's own error rather than a form's.
  const depth = (error: (typeof errors)[number]) => error.instancePath.split('/').length;
  const outermost = errors.filter((error) => depth(error) === Math.min(...errors.map(depth)));
  const error = outermost.find((error) => error.keyword === 'anyOf') ?? outermost[0]!;
  const field = error.instancePath.slice(1).replaceAll('/', '.');
  const got = JSON.stringify(field === '' ? value : Value.Pointer.Get(value, error.instancePath));
  const problem = error.keyword === 'anyOf' ? 'is none of the forms it may take' : error.message;
  throw new ModelFilesError(
    `${path}: ${field === '' ? 'the file' : `"${field}"`} ${problem}; got ${got ?? 'nothing'}.`,
  );
}

// `dense_vecs`: bge-m3 exports that give its three outputs (dense, token weights, ColBERT vectors).
const pooledOutputs = ['sentence_embedding', 'dense_vecs'];
const tokenOutputs = ['last_hidden_state', 'token_embeddings'];

/** Reads the facts of the model in `dir` whose graph is `onnxPath`; `label` names it in messages. */
export async function readModelFacts(
  dir: string,
  onnxPath: string,
  label: string,
  taskHint?: Task,
): Promise<ModelFacts> {
  const config = readModelFile(join(dir, 'config.json'), ModelConfig) ?? {};
  const tokenizerConfig = readModelFile(join(dir, 'tokenizer_config.json'), TokenizerConfig) ?? {};
  const sbertConfig = readModelFile(join(dir, 'sentence_bert_config.json'), SentenceBertConfig);
  const stConfig = readModelFile(join(dir, 'config_sentence_transformers.json'), SentenceTransformersConfig);
  const modules = readModelFile(join(dir, 'modules.json'), StModules) ?? [];
  let graph;
  try {
    graph = await readGraphInterface(onnxPath);
  } catch (error) {
    throw new ModelFilesError(
      `Model "${label}": ${onnxPath} is not a readable ONNX model (${(error as Error).message}).`,
    );
  }

  if (isMultimodal(config)) {
    const tower = await readMultimodalFacts(dir, onnxPath, graph, config, tokenizerConfig, label);
    return {
      task: 'embedding',
      family: config.model_type ?? 'unknown',
      maxTokens: tower.maxTokens,
      width: tower.width,
      pooling: 'mean',
      // Image-text vectors are compared by cosine; a request may still ask for them as pooled.
      normalize: true,
      prompts: promptsOf(stConfig),
      defaultPromptName: stConfig?.default_prompt_name,
      rerankScoring: { kind: 'sigmoid' },
      activation: 'none',
      declared: { pooling: false, normalize: false, prompts: Object.keys(promptsOf(stConfig)).length > 0 },
      id2label: labelsOf(config, 1),
      vocabSize: tower.vocabSize,
      output: { name: tower.output.info.name, pooled: true, type: tower.output.info.type },
      heads: { kinds: ['dense'] },
      feeds: tower.feeds,
      externalData: graph.externalData,
      multimodal: tower.multimodal,
    };
  }
  const yesNo = yesNoRerankerOf(config, graph.outputs, label, taskHint ?? taskFromConfig(config, stConfig));
  if (yesNo && 'refused' in yesNo) throw new ModelFilesError(`Model "${label}": ${yesNo.refused}.`);
  const task: Task = yesNo ? 'rerank' : (taskHint ?? taskFromConfig(config, stConfig));
  // SPLADE and ColBERT models give no dense vector: their output and heads come from their own files.
  const special =
    task === 'embedding'
      ? specialModelOutputs(dir, config, modules, stConfig, tokenizerConfig, graph.outputs, label)
      : undefined;
  const output = special?.output ?? chooseOutput(graph.outputs, task, label);
  const pooling = readPooling(dir, modules, label);
  const dense = modules.find((m) => m.type?.endsWith('.Dense'));
  if (!special && task === 'embedding' && dense && !output.pooled) {
    throw new ModelFilesError(
      `Model "${label}": modules.json has a Dense module (${dense.path ?? dense.name}) that the ONNX graph does not contain (it outputs "${output.info.name}", not "sentence_embedding"), so its vectors would not be the model's. ` +
        'Export the whole sentence-transformers pipeline (optimum-cli export onnx --library sentence_transformers --model <repo> <dir>), or use a repository whose graph outputs "sentence_embedding".',
    );
  }

  // A causal LM reranker's cut graph gives the logits of its answer tokens, the positive first.
  const answers = yesNo?.causal ? rerankTemplates[yesNo.template].answers : undefined;
  const width = answers?.length ?? special?.width ?? outputWidth(output.info, config, task);
  const id2label = answers
    ? Object.fromEntries(answers.map((answer, i) => [String(i), answer]))
    : labelsOf(config, headTasks.includes(task) ? width : 1);
  return {
    task,
    family: config.model_type ?? 'unknown',
    maxTokens: windowOf(config, tokenizerConfig, sbertConfig, label),
    width,
    pooling: pooling ?? 'mean',
    normalize: special
      ? special.normalize
      : modules.length > 0
        ? modules.some((m) => m.type?.endsWith('.Normalize'))
        : true,
    prompts: promptsOf(stConfig),
    defaultPromptName: stConfig?.default_prompt_name,
    rerankScoring: answers
      ? answers.length === 1
        ? { kind: 'sigmoid' }
        : { kind: 'softmax', positive: 0, labels: 2 }
      : task === 'rerank'
        ? scoringOf(width, id2label, label)
        : { kind: 'sigmoid' },
    // A cross-encoder's scores are its rerank scores: the sigmoid of its one logit, or the softmax of two.
    activation: task === 'rerank' ? (width === 1 ? 'sigmoid' : 'softmax') : activationOf(config, width),
    declared: {
      pooling: pooling !== undefined,
      normalize: modules.length > 0,
      prompts: Object.keys(promptsOf(stConfig)).length > 0,
    },
    id2label,
    vocabSize: config.vocab_size ?? 0,
    output: { name: output.info.name, pooled: output.pooled, type: output.info.type },
    heads: special?.heads ?? headsOf(task, output, graph.outputs, config.vocab_size ?? 0),
    lateInteraction: special?.lateInteraction,
    feeds: feedsOf(graph.inputs, label),
    externalData: graph.externalData,
    yesNo,
  };
}

/** Labels a cross-encoder's two-label head has: generic names, or relevance words. */
const relevanceLabel = /^(0|1|label_0|label_1|true|false|yes|no|relevant|irrelevant|not[_ ]relevant)$/i;

/**
 * The task of a model whose manifest names none, from its files. A `*ForSequenceClassification`
 * head is a cross-encoder reranker when sentence-transformers saved it as a CrossEncoder, when it
 * has one label, or two with generic or relevance names (LABEL_0 / LABEL_1, relevant / irrelevant);
 * it is a classifier when `problem_type` is multi-label, or it has three labels or more, or two
 * with names of their own (NEGATIVE / POSITIVE). Anything else is an embedder.
 */
export function taskFromConfig(config: ModelConfig, stConfig: SentenceTransformersConfig | undefined): Task {
  if (!(config.architectures ?? []).some((a) => a.endsWith('ForSequenceClassification'))) return 'embedding';
  // sentence-transformers 4+ writes its CrossEncoder settings into config.json; older versions into their own file.
  if (config.sentence_transformers || stConfig?.model_type === 'CrossEncoder') return 'rerank';
  if (config.problem_type === 'multi_label_classification') return 'classify';
  const labels = Object.values(config.id2label ?? {});
  const count = Math.max(labels.length, config.num_labels ?? 0);
  if (count <= 1) return 'rerank';
  if (count === 2 && (labels.length < 2 || labels.every((name) => relevanceLabel.test(name.trim())))) return 'rerank';
  return 'classify';
}

function activationOf(config: ModelConfig, width: number): ClassifyActivation {
  if (config.problem_type === 'regression') return 'none';
  if (config.problem_type === 'multi_label_classification' || width === 1) return 'sigmoid';
  return 'softmax';
}

function chooseOutput(outputs: TensorInfo[], task: Task, label: string): { info: TensorInfo; pooled: boolean } {
  const named = (names: string[]) =>
    names.map((name) => outputs.find((o) => o.name === name)).find((o) => o !== undefined);
  const head = headTasks.includes(task);
  const found = head ? named(['logits']) : named(pooledOutputs);
  if (found) return { info: found, pooled: !head };
  const tokens = head ? undefined : named(tokenOutputs);
  if (tokens) return { info: tokens, pooled: false };
  const wanted = head ? '"logits"' : '"sentence_embedding" or "last_hidden_state"';
  throw new ModelFilesError(
    `Model "${label}": a ${task} model needs an output named ${wanted}; the graph has ${outputs.map((o) => `"${o.name}"`).join(', ')}.`,
  );
}

interface SpecialOutputs {
  output: { info: TensorInfo; pooled: boolean };
  width: number;
  normalize: boolean;
  heads: ModelHeads;
  lateInteraction?: LateInteractionFacts;
}

/** A SPLADE model's logits, or a ColBERT model's projected token vectors; undefined for other models. */
function specialModelOutputs(
  dir: string,
  config: ModelConfig,
  modules: StModules,
  stConfig: SentenceTransformersConfig | undefined,
  tokenizerConfig: TokenizerConfig,
  outputs: TensorInfo[],
  label: string,
): SpecialOutputs | undefined {
  const names = outputs.map((o) => `"${o.name}"`).join(', ');
  if (isSplade(config, modules, outputs)) {
    const logits = outputs.find((o) => o.name === 'logits');
    if (!logits)
      throw new ModelFilesError(
        `Model "${label}": a SPLADE (masked-LM) model needs its graph to output "logits" [batch, sequence, vocabulary]; the graph has ${names}. Export it with optimum-cli export onnx --task fill-mask.`,
      );
    const module = modules.find((m) => m.type?.endsWith('SpladePooling'));
    const refused = checkSpladePooling(
      readModelFile(join(dir, module?.path ?? '1_SpladePooling', 'config.json'), SpladePoolingConfig),
    );
    if (refused) throw new ModelFilesError(`Model "${label}": ${refused}.`);
    const dimension = lastDim(logits) ?? config.vocab_size ?? 0;
    return {
      output: { info: logits, pooled: false },
      width: dimension,
      normalize: false,
      heads: { kinds: ['sparse'], sparse: { pooling: 'mlm', output: 'logits', dimension } },
    };
  }
  if (isLateInteraction(modules, stConfig)) {
    const module = modules.find((m) => m.type?.endsWith('.Dense'));
    const projection = module
      ? readModelFile(join(dir, module.path ?? '1_Dense', 'config.json'), DenseConfig)
      : undefined;
    const width = projection?.out_features ?? config.hidden_size ?? 0;
    const candidates = ['colbert_vecs', 'token_embeddings', 'last_hidden_state']
      .map((name) => outputs.find((o) => o.name === name))
      .filter((o): o is TensorInfo => o !== undefined);
    const tokens = candidates.find((o) => lastDim(o) === width);
    if (!tokens) {
      throw new ModelFilesError(
        `Model "${label}": a ColBERT model's graph must output its projected token vectors ("token_embeddings" of width ${width}, the Dense module's out_features); the graph has ${names}${candidates[0] ? ` ("${candidates[0].name}" is ${lastDim(candidates[0]) ?? 'of unknown width'} wide)` : ''}. Export the model with its projection.`,
      );
    }
    const mask = tokenizerConfig.mask_token;
    const maskToken = typeof mask === 'string' ? mask : mask?.content;
    return {
      output: { info: tokens, pooled: false },
      width,
      normalize: true,
      heads: { kinds: ['tokens'], tokens: { output: tokens.name, type: tokens.type, width } },
      lateInteraction: lateInteractionFacts(stConfig, maskToken),
    };
  }
  return undefined;
}

/** An embedder's dense vector, its token vectors when the graph gives them, and bge-m3-style token weights. */
function headsOf(
  task: Task,
  output: { info: TensorInfo; pooled: boolean },
  outputs: TensorInfo[],
  vocabSize: number,
): ModelHeads {
  if (task !== 'embedding') return { kinds: ['dense'] };
  const heads: ModelHeads = { kinds: ['dense'] };
  const tokens = output.pooled
    ? tokenOutputs.map((name) => outputs.find((o) => o.name === name)).find((o) => o !== undefined)
    : output.info;
  const tokensWidth = tokens && lastDim(tokens);
  if (tokens && (tokensWidth || !output.pooled)) {
    heads.kinds.push('tokens');
    heads.tokens = { output: tokens.name, type: tokens.type, width: tokensWidth ?? 0 };
  }
  const weights = tokenWeightsOutput(outputs);
  if (weights && vocabSize > 0) {
    heads.kinds.push('sparse');
    heads.sparse = { pooling: 'weights', output: weights.name, dimension: vocabSize };
  }
  return heads;
}

/** The pooling of `1_Pooling/config.json` (the Pooling module's folder), if the model has one. */
function readPooling(dir: string, modules: StModules, label: string): Pooling | undefined {
  const module = modules.find((m) => m.type?.endsWith('.Pooling'));
  const poolingConfig = readModelFile(join(dir, module?.path ?? '1_Pooling', 'config.json'), PoolingConfig);
  if (!poolingConfig) return undefined;
  // Newer files name the mode; older ones set one flag per mode, and several flags concatenate.
  const modes = new Set<string>();
  if (poolingConfig.pooling_mode !== undefined) modes.add(poolingConfig.pooling_mode);
  for (const [key, value] of Object.entries(poolingConfig)) {
    const match = /^pooling_mode_(.+?)(?:_tokens?|_token)?$/.exec(key);
    if (match && value === true) modes.add(match[1]!);
  }
  if (poolingConfig.include_prompt === false && !modes.has('cls') && !modes.has('lasttoken')) {
    throw new ModelFilesError(
      `Model "${label}": its pooling leaves the prompt's tokens out (include_prompt: false), which this server does not do yet.`,
    );
  }
  const unique = [...modes];
  if (unique.length === 0) return undefined;
  const unknown = unique.filter((mode) => !(poolings as readonly string[]).includes(mode));
  if (unknown.length > 0 || unique.length > 1) {
    const why =
      unknown.length > 0
        ? `the pooling mode ${unknown.map((m) => `"${m}"`).join(', ')} is not supported`
        : `it concatenates ${unique.length} pooling modes (${unique.join(' + ')})`;
    throw new ModelFilesError(
      `Model "${label}": ${module?.path ?? '1_Pooling'}/config.json says ${why}; this server pools by one of ${poolings.join(', ')}. ` +
        'Use an export whose graph outputs "sentence_embedding", or a model with a supported pooling.',
    );
  }
  return unique[0] as Pooling;
}

/** The window: the tightest of what the files declare. */
function windowOf(
  config: ModelConfig,
  tokenizerConfig: TokenizerConfig,
  sbertConfig: SentenceBertConfig | undefined,
  label: string,
): number {
  // RoBERTa-family position tables reserve padding_idx + 1 slots, so 514 positions hold 512 tokens.
  const positionOffset = ['roberta', 'xlm-roberta', 'camembert', 'mpnet'].includes(config.model_type ?? '') ? 2 : 0;
  const positions = config.max_position_embeddings ?? config.n_positions;
  const windows = [
    sbertConfig?.max_seq_length,
    tokenizerConfig.model_max_length !== undefined && tokenizerConfig.model_max_length < 1e6
      ? tokenizerConfig.model_max_length
      : undefined,
    positions !== undefined ? positions - positionOffset : undefined,
  ].filter((n): n is number => n !== undefined && Number.isInteger(n) && n > 0);
  if (windows.length === 0)
    throw new ModelFilesError(
      `Model "${label}": neither config.json nor the tokenizer files say how many tokens it takes.`,
    );
  return Math.min(...windows);
}

function outputWidth(output: TensorInfo, config: ModelConfig, task: Task): number {
  const last = output.shape[output.shape.length - 1];
  if (typeof last === 'number' && last > 0) return last;
  if (headTasks.includes(task)) return Object.keys(config.id2label ?? { 0: '' }).length || 1;
  return config.hidden_size ?? config.n_embd ?? config.d_model ?? 0;
}

function labelsOf(config: ModelConfig, count: number): Record<string, string> {
  return config.id2label ?? Object.fromEntries(Array.from({ length: count }, (_, i) => [String(i), `LABEL_${i}`]));
}

/**
 * One logit: its sigmoid (sentence-transformers' CrossEncoder default for num_labels 1). Two: the
 * softmax probability of the positive label, found by name when the labels have telling names,
 * else the second one (LABEL_1).
 */
function scoringOf(width: number, id2label: Record<string, string>, label: string): RerankScoring {
  if (width === 1) return { kind: 'sigmoid' };
  if (width === 2) {
    const positive = Object.entries(id2label).find(([, name]) =>
      /^(1|true|yes|relevant|positive|entailment|label_1)$/i.test(name.trim()),
    );
    return { kind: 'softmax', positive: positive ? Number(positive[0]) : 1, labels: 2 };
  }
  throw new ModelFilesError(
    `Model "${label}": its classification head has ${width} labels (${Object.values(id2label).join(', ')}); a reranker gives one relevance logit or two (not relevant, relevant). Serve it as a classifier (a manifest with "task": "classify").`,
  );
}

/** `prompts` of config_sentence_transformers.json. */
function promptsOf(stConfig: SentenceTransformersConfig | undefined): Record<string, string> {
  return stConfig?.prompts ?? {};
}

function feedsOf(inputs: TensorInfo[], label: string): GraphFeeds {
  const byName = new Map(inputs.map((input) => [input.name, input]));
  for (const required of ['input_ids', 'attention_mask']) {
    if (!byName.has(required))
      throw new ModelFilesError(
        `Model "${label}": the graph has no "${required}" input (inputs: ${inputs.map((i) => i.name).join(', ')}).`,
      );
  }
  const idType = byName.get('input_ids')!.type;
  if (idType !== 'int64' && idType !== 'int32')
    throw new ModelFilesError(`Model "${label}": "input_ids" is ${idType}; int64 or int32 expected.`);
  const known = new Set(['input_ids', 'attention_mask', 'token_type_ids', 'position_ids']);
  const pastKeyValues = inputs
    .filter((input) => input.name.startsWith('past_key_values.'))
    .map(({ name, type, shape }) => ({ name, type, shape }));
  const unknown = inputs.filter((input) => !known.has(input.name) && !input.name.startsWith('past_key_values.'));
  if (unknown.length > 0) {
    throw new ModelFilesError(
      `Model "${label}": the graph takes inputs this server does not know how to feed: ${unknown.map((i) => `"${i.name}"`).join(', ')}.`,
    );
  }
  return { idType, tokenTypeIds: byName.has('token_type_ids'), positionIds: byName.has('position_ids'), pastKeyValues };
}
