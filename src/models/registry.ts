/**
 * The registry of served models: which files each model has, what its files say (window, width,
 * pooling), its tokenizer, and whether it is warm. Built once at start; a model that is missing or
 * broken stops the start with a message that says which files are missing and how to get them.
 */
import { existsSync, statSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { dirname, join, resolve } from 'node:path';
import { ConfigError } from '../config.js';
import { isAccelerator } from '../devices.js';
import { ApiError } from '../errors.js';
import { TextTokenizer } from '../text/tokenizer.js';
import type { Pooling } from '../vectors/pooling.js';
import type { BeforeCut, Catalogue, Manifest, ModerationTable } from './catalogue.js';
import {
  ModelFilesError,
  readModelFacts,
  type ClassifyActivation,
  type GraphFeeds,
  type ModelFacts,
  type RerankScoring,
  type Task,
} from './facts.js';
import type { LateInteractionFacts, ModelHeads } from './heads.js';
import type { ImageProcessorSpec } from './image-processor.js';
import type { MultimodalFamily } from './multimodal.js';
import { readLock, type ModelLock } from './lock.js';
import { lastTokenGraph, rerankTemplates, type CutGraph, type RerankTemplate } from './yes-no-rerankers.js';
import { filesIn, modelDir } from './paths.js';
import {
  externalDataFiles,
  findVariantGraph,
  parseServedId,
  variantCandidates,
  VariantError,
  type Variant,
} from './variants.js';

export type { Task } from './facts.js';

export type { Variant } from './variants.js';

/** What a worker needs to open one model's session. Plain data: it crosses into worker threads. */
export interface ModelLoadSpec {
  id: string;
  task: Task;
  onnxPath: string;
  pooling: Pooling;
  padId: number;
  /** The graph output to read, and whether it is already one vector per row. */
  output: ModelFacts['output'];
  /** The kinds of output the model gives, and which graph outputs give them. */
  heads: ModelHeads;
  /** Token ids a sparse vector leaves out: the special tokens of a single sequence. */
  specialIds: number[];
  feeds: GraphFeeds;
  /** A vision tower: the session takes images (pixel_values), not token ids. */
  vision?: VisionLoadSpec;
  /** A token id every text tower takes, for its warm-up run (an image-text model's). */
  fillerId?: number;
  /** Where the graph's external data files are when they are not beside it (a cut graph in the data dir). */
  externalDataDir?: string;
}

/** What a worker needs to run an image-text model's vision tower. */
export interface VisionLoadSpec {
  /** preprocessor_config.json's resize, crop and normalisation (image-processor.ts). */
  processor: ImageProcessorSpec;
  pixelType: 'float32' | 'float16';
  height: number;
  width: number;
  /** A joint graph: `input_ids` fed beside the pixels (the empty text's ids), one row or as many as the images. */
  textDummy?: { idType: 'int64' | 'int32'; batchMatched: boolean; ids: number[] };
}

/** An image-text model's vision side, beside its text tower (the served model itself). */
export interface ServedVision {
  family: MultimodalFamily;
  /** Tokens one image counts for (patches, plus the class token where the tower has one). */
  sequenceLength: number;
  /** The vision tower, placed and run by the engine as a model of its own (id `<model>#vision`). */
  tower: ServedModel;
}

/** A ColBERT model's encoding with its tokens resolved to ids. */
export interface LateInteraction extends Omit<LateInteractionFacts, 'skiplistWords'> {
  queryMarkerId: number;
  documentMarkerId: number;
  maskId: number;
  /** Token ids left out of documents. */
  skiplist: Set<number>;
}

/** A yes/no reranker's template with its fixed parts as token ids. */
export interface ResolvedRerankTemplate extends RerankTemplate {
  prefixIds: Int32Array;
  separatorIds: Int32Array;
  /** The parts after the document, under an instruction (the default one's computed once). */
  suffixIds(instruction: string): Int32Array;
}

/** What other servers' model descriptions tell (TEI's /info, Ollama's /api/show), computed once at start. */
export interface ModelDescription {
  /** config.json's `model_type` (bert, xlm-roberta, ...). */
  family: string;
  /** Class labels of a reranker, by index. */
  id2label: Record<string, string>;
  /** Bytes of the ONNX graph and its external data. */
  size: number;
  modifiedAt: Date;
  /** Identifies this version of the model files, as a sha256 hex digest. */
  digest: string;
  /** Parameters, estimated from the size and the weights' width. */
  parameters: number;
}

export interface ServedModel extends ModelLoadSpec {
  /** Served id without the variant suffix: the Hub repo id for Hub models. */
  baseId: string;
  /** Other names requests may use (a manifest's short id). */
  aliases: string[];
  variant: Variant;
  /** Where the model runs: `cpu`, or the accelerator its one session runs on (devices.ts). */
  device: string;
  dir: string;
  /** The Hub repository and the exact commit the files came from, when known. */
  repo?: string;
  revision?: string;
  tokenizer: TextTokenizer;
  /** Longest sequence the model takes, special tokens included. */
  maxTokens: number;
  /** Width of the model's vectors (embedders; from the graph or config, confirmed by the warm-up run). */
  dimensions: number;
  normalize: boolean;
  matryoshkaDimensions?: number[];
  /** What `dimensions` does to the full-width vector before it cuts (the manifest's: its card's recipe). */
  beforeCut?: BeforeCut;
  /** Prompts by name (sentence-transformers' `prompts`, plus a manifest's query / document prefixes). */
  prompts: Record<string, string>;
  /** The prompt applied when a request names none. */
  defaultPromptName?: string;
  rerankScoring: RerankScoring;
  /** Set for ColBERT models: they rerank by MaxSim over token vectors. */
  lateInteraction?: LateInteraction;
  /** Set for yes/no rerankers (Qwen3-Reranker, bge-reranker-v2-gemma): pairs are written in this template, with an instruction. */
  rerankTemplate?: ResolvedRerankTemplate;
  /** A classifier's (or a cross-encoder's) labels in logit order, and how its logits become scores. */
  labels: string[];
  activation: ClassifyActivation;
  /** A moderation classifier's table (its manifest's): how its labels answer /v1/moderations. */
  moderation?: ModerationTable;
  vocabSize: number;
  /** Most inputs per inference run; 1 keeps results independent of batch neighbours (int8). */
  maxBatchSize?: number;
  /**
   * Identifies the content of the graph files: the lock's commit and the graph's checksum when the
   * lock lists the graph (the same on every replica that pulled it), else the description's digest
   * (path, size and modification time). Caches of model outputs are keyed by it.
   */
  filesId: string;
  /** An image-text model: it embeds images too, through its vision tower. */
  images?: ServedVision;
  /** Unix seconds: when the model file was written. */
  created: number;
  ownedBy: string;
  description: ModelDescription;
}

function howToGet(id: string, manifest: Manifest | undefined, dir: string): string {
  if (!manifest) {
    const pull = id.includes('/') ? `Download it with "onnx-gateway models pull ${id}", or put` : 'Put';
    return `${pull} a Hugging Face-layout folder (config.json, tokenizer.json, onnx/model.onnx) at ${dir}.`;
  }
  if (manifest.source.kind === 'generated')
    return `Generate it with: ${manifest.source.command.replace('<models-dir>', resolve(dir, '..'))}`;
  const { repo, revision } = manifest.source;
  return `Download it with "onnx-gateway models pull ${id}", or fetch the files of https://huggingface.co/${repo}/tree/${revision} into ${dir}.`;
}

/** The folder of the data dir where cut graphs go when a model's folder can not be written. */
export function cutGraphsDir(dataDir: string): string {
  return join(dataDir, 'cut-graphs');
}

/**
 * A model's files checked and read into what serving it needs. `cutsDir`: where a causal LM
 * reranker's cut graph is written when the model's folder can not be (a read-only models mount).
 */
export async function loadServedModel(
  spec: string,
  modelsDir: string,
  catalogue: Catalogue,
  defaultVariant: Variant = 'fp32',
  device = 'cpu',
  cutsDir?: string,
): Promise<ServedModel> {
  let parsed: { baseId: string; variant: Variant };
  try {
    parsed = parseServedId(spec, defaultVariant);
  } catch (error) {
    if (error instanceof VariantError) throw new ModelFilesError(`Model "${spec}": ${error.message}`);
    throw error;
  }
  const manifest = catalogue.get(parsed.baseId);
  // A Hub model is served by its repo id; its manifest's short id stays an alias.
  const baseId = manifest?.source.kind === 'hub' ? manifest.source.repo : parsed.baseId;
  const aliases = manifest && manifest.id !== baseId ? [manifest.id] : [];
  const dir = modelDir(modelsDir, parsed.baseId, catalogue);
  const lock = readLock(dir);
  const files = filesIn(dir);
  // On an accelerator the half-precision graph, where the folder has one and no variant is named.
  const halfOnAccelerator =
    isAccelerator(device) &&
    !spec.includes(':') &&
    defaultVariant === 'fp32' &&
    findVariantGraph('fp16', files) !== undefined;
  const variant: Variant = halfOnAccelerator ? 'fp16' : parsed.variant;
  const served = (name: string) => (variant === defaultVariant || halfOnAccelerator ? name : `${name}:${variant}`);
  // The graph the pull chose for this variant, else the first of the variant's names present.
  const lockedGraph = lock?.variants[variant];
  const onnxRelative = lockedGraph && files.includes(lockedGraph) ? lockedGraph : findVariantGraph(variant, files);
  const missing = ['config.json', 'tokenizer.json'].filter((file) => !files.includes(file));
  if (!onnxRelative) missing.push(`the ${variant} graph (${variantCandidates(variant).join(' or ')})`);
  if (missing.length > 0) {
    const where = existsSync(dir) ? `${dir} lacks ${missing.join(', ')}` : `${dir} does not exist`;
    // Only the int8 graph missing: it is made from the fp32 one, not downloaded.
    const onlyInt8 = variant === 'int8' && missing.length === 1 && findVariantGraph('fp32', files) !== undefined;
    const how = onlyInt8
      ? `Make it with "onnx-gateway models quantize ${parsed.baseId}", or pull the repository's own with "onnx-gateway models pull ${parsed.baseId}:int8".`
      : howToGet(parsed.baseId, manifest, dir);
    throw new ModelFilesError(`Model "${spec}" is not usable: ${where}. ${how}`);
  }
  const onnxPath = join(dir, onnxRelative!);
  const facts = await readModelFacts(dir, onnxPath, spec, manifest?.task);
  // The weights beside the graph: the files it names, and those named after it.
  const graphFolder = dirname(onnxPath);
  const dataFiles = [
    ...new Set([
      ...externalDataFiles(onnxRelative!, files).map((file) => join(dir, file)),
      ...facts.externalData.map((file) => join(graphFolder, file)),
    ]),
  ];
  const absent = dataFiles.filter((file) => !existsSync(file));
  if (absent.length > 0)
    throw new ModelFilesError(
      `Model "${spec}": ${onnxPath} keeps weights in ${absent.join(', ')}, which do not exist. ${howToGet(parsed.baseId, manifest, dir)}`,
    );

  let tokenizer: TextTokenizer;
  try {
    tokenizer = await TextTokenizer.fromDirectory(dir);
  } catch (error) {
    throw new ModelFilesError(`Model "${spec}": tokenizer.json can not be loaded: ${(error as Error).message}`);
  }

  const description = describe(onnxPath, dataFiles, variant, facts);
  const rerankTemplate = facts.yesNo ? resolveTemplate(facts.yesNo.template, tokenizer) : undefined;
  // A causal LM reranker runs its graph cut to the answer logits at the last token.
  const servedGraph = facts.yesNo?.causal
    ? cutGraph(
        onnxPath,
        rerankTemplate!.answers.map((answer) => answerId(answer, tokenizer, spec)),
        spec,
        cutsDir,
      )
    : { path: onnxPath };
  const id = served(baseId);
  const source = manifest?.source.kind === 'hub' ? manifest.source : undefined;
  const repo = source?.repo ?? (baseId.includes('/') ? baseId : undefined);
  const text: ServedModel = {
    id,
    baseId,
    aliases: aliases.map(served),
    variant,
    device,
    task: facts.task,
    dir,
    repo,
    // The commit the files came from: the lock's, else the manifest's pin.
    revision: lock?.commit ?? source?.revision,
    onnxPath: servedGraph.path,
    externalDataDir: servedGraph.externalDataDir,
    // A manifest states what the files leave open; where the files speak, they win.
    pooling: facts.declared.pooling ? facts.pooling : (manifest?.pooling ?? facts.pooling),
    padId: tokenizer.padId,
    output: facts.output,
    heads: facts.heads,
    specialIds: tokenizer.singleSpecialIds,
    lateInteraction: facts.lateInteraction ? resolveLateInteraction(facts.lateInteraction, tokenizer, spec) : undefined,
    rerankTemplate,
    feeds: facts.feeds,
    tokenizer,
    maxTokens: facts.maxTokens,
    dimensions: facts.task === 'embedding' ? facts.width : 0,
    normalize: facts.declared.normalize ? facts.normalize : (manifest?.normalize ?? facts.normalize),
    matryoshkaDimensions: manifest?.matryoshkaDimensions,
    beforeCut: manifest?.beforeCut,
    prompts: facts.declared.prompts ? facts.prompts : (manifest?.prompts ?? {}),
    defaultPromptName: facts.defaultPromptName,
    rerankScoring: facts.rerankScoring,
    // A cross-encoder's labels too: TEI's /predict answers it as a classifier of its one (or two) labels.
    labels:
      facts.task !== 'embedding'
        ? Array.from({ length: facts.width }, (_, i) => facts.id2label[String(i)] ?? `LABEL_${i}`)
        : [],
    activation: facts.activation,
    moderation: facts.task === 'classify' ? manifest?.moderation : undefined,
    vocabSize: facts.vocabSize,
    maxBatchSize: variant === 'int8' ? 1 : undefined,
    filesId: filesIdentity(lock, onnxRelative!, description),
    created: Math.floor(statSync(onnxPath).mtimeMs / 1000),
    ownedBy: repo ? repo.split('/')[0]! : 'onnx-gateway',
    description,
  };
  if (!facts.multimodal) return text;
  const fillerId = tokenizer.single(new Int32Array(0), text.maxTokens)[0] ?? tokenizer.padId;
  return { ...text, fillerId, images: visionTower(text, facts, lock, variant, fillerId) };
}

/**
 * The vision side of an image-text model: its tower as a model of its own for the engine (placed
 * in the memory budget beside the text tower, batched in a queue of its own), with the vision
 * graph, its pooled output and the image processor's configuration.
 */
function visionTower(
  text: ServedModel,
  facts: ModelFacts,
  lock: ModelLock | undefined,
  variant: Variant,
  fillerId: number,
): ServedVision {
  const vision = facts.multimodal!.vision;
  const graphFolder = dirname(vision.onnxPath);
  const dataFiles = vision.externalData.map((file) => join(graphFolder, file));
  const relative = vision.onnxPath
    .slice(text.dir.length + 1)
    .split('\\')
    .join('/');
  const description = describe(vision.onnxPath, dataFiles, variant, facts);
  const tower: ServedModel = {
    ...text,
    id: `${text.id}#vision`,
    aliases: [],
    onnxPath: vision.onnxPath,
    output: { name: vision.output.name, pooled: true, type: vision.output.type },
    feeds: {
      ...text.feeds,
      attentionMask: false,
      fixedLength: undefined,
      uniformLength: undefined,
      pixelDummy: undefined,
    },
    vision: {
      processor: facts.multimodal!.processor,
      pixelType: vision.pixelType,
      height: vision.height,
      width: vision.width,
      ...(vision.textDummy ? { textDummy: { ...vision.textDummy, ids: [fillerId] } } : {}),
    },
    fillerId: undefined,
    // Its own identity: the cache keys image vectors by it, apart from the text tower's.
    filesId: `${filesIdentity(lock, relative, description)}#vision:${vision.output.name}`,
    created: Math.floor(statSync(vision.onnxPath).mtimeMs / 1000),
    description,
  };
  return { family: facts.multimodal!.family, sequenceLength: vision.sequenceLength, tower };
}

/**
 * The device each model of `ids` (as configured) is to run on: its deviceMap entry, found by the id
 * it is configured by, its served id or its catalogue alias, else `device`. An entry that names no
 * configured model is refused, so that a typo never leaves a model on the wrong device unnoticed.
 */
export function wantedDevices(
  ids: string[],
  device: string,
  map: Readonly<Record<string, string>>,
  catalogue: Catalogue,
): Map<string, string> {
  const list = ids.length > 0 ? ids : catalogue.defaults();
  const used = new Set<string>();
  const wanted = new Map<string, string>();
  for (const id of list) {
    const name = namesOf(id, catalogue).find((name) => name in map);
    if (name) used.add(name);
    wanted.set(id, name ? map[name]! : device);
  }
  const unknown = Object.keys(map).filter((name) => !used.has(name));
  if (unknown.length > 0) {
    throw new ConfigError(
      `deviceMap (ONNX_GATEWAY_DEVICE_MAP) names ${unknown.map((name) => `"${name}"`).join(', ')}, which ${unknown.length > 1 ? 'are' : 'is'} not served: the served models are ${list.join(', ')}.`,
    );
  }
  return wanted;
}

/** Every name a configured model goes by: as configured, without its variant, its repo id and its catalogue id. */
function namesOf(id: string, catalogue: Catalogue): string[] {
  const colon = id.lastIndexOf(':');
  const baseId = colon < 0 ? id : id.slice(0, colon);
  const manifest = catalogue.get(baseId);
  const repo = manifest?.source.kind === 'hub' ? manifest.source.repo : undefined;
  return [
    ...new Set(
      [id, baseId, manifest?.id, repo, repo && colon >= 0 ? repo + id.slice(colon) : undefined].filter(
        (name): name is string => !!name,
      ),
    ),
  ];
}

/**
 * A graph the lock lists came from its commit with that checksum; any other graph (made here by
 * `models quantize`, or copied in by hand) is known by its path, size and modification time.
 */
function filesIdentity(lock: ModelLock | undefined, onnxRelative: string, description: ModelDescription): string {
  const locked = lock?.files.find((file) => file.path === onnxRelative);
  const checksum = locked?.sha256 ?? locked?.gitSha1;
  if (lock && locked && checksum) return `${lock.repo}@${lock.commit}/${onnxRelative}#${checksum}:${description.size}`;
  return `digest:${description.digest}`;
}

function resolveTemplate(name: keyof typeof rerankTemplates, tokenizer: TextTokenizer): ResolvedRerankTemplate {
  const template = rerankTemplates[name];
  // Each part tokenised alone, as the reference does.
  const ids = (parts: string[]) => {
    const pieces = parts.map((part) => tokenizer.encode(part));
    const out = new Int32Array(pieces.reduce((n, piece) => n + piece.length, 0));
    let at = 0;
    for (const piece of pieces) {
      out.set(piece, at);
      at += piece.length;
    }
    return out;
  };
  const defaultSuffix = ids(template.suffix(template.defaultInstruction));
  return {
    ...template,
    prefixIds: ids(template.prefix),
    separatorIds: ids(template.separator),
    suffixIds: (instruction) =>
      instruction === template.defaultInstruction ? defaultSuffix : ids(template.suffix(instruction)),
  };
}

/** An answer token's id: it must be one token of the vocabulary, as the model reads its logit. */
function answerId(answer: string, tokenizer: TextTokenizer, label: string): number {
  const id = tokenizer.idOf(answer);
  if (id === undefined || tokenizer.encode(answer).length !== 1)
    throw new ModelFilesError(`Model "${label}": its answer "${answer}" is not one token of its vocabulary.`);
  return id;
}

function cutGraph(onnxPath: string, answerIds: number[], label: string, fallbackDir?: string): CutGraph {
  try {
    return lastTokenGraph(onnxPath, answerIds, fallbackDir);
  } catch (error) {
    throw new ModelFilesError(
      `Model "${label}": its graph can not be cut to the answer logits at the last token (${(error as Error).message}).`,
    );
  }
}

/** The marker, [MASK] and skiplist tokens of a ColBERT model as ids; a marker the vocabulary lacks stops the start. */
function resolveLateInteraction(facts: LateInteractionFacts, tokenizer: TextTokenizer, label: string): LateInteraction {
  const id = (token: string, what: string) => {
    const found = tokenizer.idOf(token) ?? tokenizer.idOf(token.trim());
    if (found === undefined)
      throw new ModelFilesError(`Model "${label}": its ${what} "${token}" is not a token of its vocabulary.`);
    return found;
  };
  const { skiplistWords, ...rest } = facts;
  const skiplist = new Set(
    skiplistWords.map((word) => tokenizer.idOf(word)).filter((i): i is number => i !== undefined),
  );
  return {
    ...rest,
    queryMarkerId: id(facts.queryPrefix, 'query_prefix'),
    documentMarkerId: id(facts.documentPrefix, 'document_prefix'),
    maskId: id(facts.maskToken, 'mask token'),
    skiplist,
  };
}

const bytesPerWeight: Record<Variant, number> = { fp32: 4, fp16: 2, int8: 1, O1: 4, O2: 4, O3: 4, O4: 2 };

function describe(onnxPath: string, dataFiles: string[], variant: Variant, facts: ModelFacts): ModelDescription {
  const stat = statSync(onnxPath);
  const size = dataFiles.reduce((sum, path) => sum + statSync(path).size, stat.size);
  return {
    family: facts.family,
    id2label: facts.id2label,
    size,
    modifiedAt: stat.mtime,
    digest: createHash('sha256').update(`${onnxPath}\n${size}\n${stat.mtimeMs}`).digest('hex'),
    parameters: Math.round(size / bytesPerWeight[variant]),
  };
}

/** The served models, by id. */
export class Registry {
  private readonly models = new Map<string, ServedModel>();

  /** Every name a request may use: ids and aliases. */
  private readonly names = new Map<string, ServedModel>();

  constructor(models: ServedModel[]) {
    for (const model of models) {
      this.models.set(model.id, model);
      for (const name of [model.id, ...model.aliases]) this.names.set(name, model);
    }
  }

  /**
   * `devices`: where each model runs, by the id it is configured by (`cpu` where absent);
   * `cutsDir`: as loadServedModel's.
   */
  static async load(
    ids: string[],
    modelsDir: string,
    catalogue: Catalogue,
    defaultVariant: Variant = 'fp32',
    devices?: ReadonlyMap<string, string>,
    cutsDir?: string,
  ): Promise<Registry> {
    const list = ids.length > 0 ? ids : catalogue.defaults();
    const errors: string[] = [];
    const models: ServedModel[] = [];
    for (const id of list) {
      try {
        models.push(await loadServedModel(id, modelsDir, catalogue, defaultVariant, devices?.get(id), cutsDir));
      } catch (error) {
        errors.push((error as Error).message);
      }
    }
    if (errors.length > 0) throw new ModelFilesError(errors.join('\n'));
    return new Registry(models);
  }

  list(): ServedModel[] {
    return [...this.models.values()];
  }

  /** The served model of this id or alias, if any. */
  get(name: string): ServedModel | undefined {
    return this.names.get(name);
  }

  /** Serves a model read since start (a pull over HTTP); it replaces one of the same id. */
  add(model: ServedModel): void {
    const old = this.models.get(model.id);
    if (old) for (const name of [old.id, ...old.aliases]) this.names.delete(name);
    this.models.set(model.id, model);
    for (const name of [model.id, ...model.aliases]) if (!this.names.has(name)) this.names.set(name, model);
  }

  /** The model named by a request; absent names pick the first served model of the task. */
  resolve(name: string | undefined, task: Task, param = 'model'): ServedModel {
    if (name === undefined || name === '') {
      const first = this.list().find((m) => m.task === task);
      if (!first) throw new ApiError('model_not_found', `No ${task} model is served here.`, { param });
      return first;
    }
    const model = this.names.get(name);
    if (!model) {
      const served = this.list()
        .filter((m) => m.task === task)
        .map((m) => m.id);
      throw new ApiError(
        'model_not_found',
        `The model "${name}" is not served here. Served ${task} models: ${served.join(', ') || 'none'}.`,
        { param },
      );
    }
    // A ColBERT model is an embedder that also reranks (by MaxSim).
    if (model.task !== task && !(task === 'rerank' && model.lateInteraction)) {
      throw new ApiError('invalid_request', `The model "${name}" is a ${model.task} model, not a ${task} model.`, {
        param,
      });
    }
    return model;
  }
}
