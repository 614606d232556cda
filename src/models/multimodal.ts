/**
 * Image-text models, recognised from their own files: config.json's `model_type` (clip, siglip,
 * jina_clip), preprocessor_config.json, and the inputs and outputs of their graphs. Such a model
 * puts texts and images in one vector space through two towers:
 *
 * - CLIP as transformers.js exports it: `onnx/text_model.onnx` (`text_embeds`) and
 *   `onnx/vision_model.onnx` (`image_embeds`), or one joint `onnx/model.onnx` where only that exists.
 *   The text tower attends causally, so a right-padded row's vector is its own: batches pad freely.
 * - SigLIP: the `pooler_output` of each tower. Its text tower takes no attention mask and was trained
 *   on texts padded to the tokenizer's `max_length` (64) with its pad token: every text is fed so.
 * - jina-clip-v2: one graph taking `input_ids` and `pixel_values` together. The modality not asked
 *   for is fed a minimal dummy (one row, or as many as the batch where the graph ties the two batch
 *   sizes; the smallest size the graph accepts); it is Matryoshka-trained (manifest's dimensions).
 *
 * A text tower whose graph takes no attention mask and whose vector padding would change (mean
 * pooling over every position) is fed rows of one length only. What can not be served exactly is
 * refused with the reason.
 */
import { existsSync, readFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { readGraphInterface, type ElementType, type GraphInterface, type TensorInfo } from '../onnx/interface.js';
import { ModelFilesError, type GraphFeeds } from './facts.js';
import type { ModelConfig, TokenizerConfig } from './file-schemas.js';
import { readImageProcessor, type ImageProcessorSpec } from './image-processor.js';

export const multimodalFamilies = ['clip', 'siglip', 'jina_clip'] as const;
export type MultimodalFamily = (typeof multimodalFamilies)[number];

/** The vision tower of an image-text model: what the worker feeds it and reads from it. */
export interface VisionFacts {
  /** The vision graph: the text graph's own file when the model has one joint graph. */
  onnxPath: string;
  joint: boolean;
  /** The pooled image vector. */
  output: { name: string; type: ElementType };
  /** `pixel_values`' element type (float32, or float16 in half-precision exports). */
  pixelType: 'float32' | 'float16';
  /** Height and width of `pixel_values` (the image processor's output). */
  height: number;
  width: number;
  /** Tokens the tower attends per image (patches, plus the class token where it has one): an image's usage. */
  sequenceLength: number;
  /** A joint graph: the `input_ids` fed beside the pixels, one dummy row or as many as the images. */
  textDummy?: { idType: 'int64' | 'int32'; batchMatched: boolean };
  /** Files beside the vision graph that hold its weights, relative to its folder (empty for a joint graph). */
  externalData: string[];
}

export interface MultimodalFacts {
  family: MultimodalFamily;
  vision: VisionFacts;
  /** preprocessor_config.json's resize, crop and normalisation, as the worker applies them. */
  processor: ImageProcessorSpec;
}

/** What an image-text model's files add to a text model's facts, for facts.ts. */
export interface MultimodalModelFacts {
  /** The text tower's pooled output. */
  output: { info: TensorInfo; pooled: true };
  width: number;
  maxTokens: number;
  vocabSize: number;
  feeds: GraphFeeds;
  multimodal: MultimodalFacts;
}

/** Whether config.json says the model is an image-text model (supported or not). */
export function isMultimodal(config: ModelConfig): boolean {
  return (
    (multimodalFamilies as readonly string[]).includes(config.model_type ?? '') ||
    (config.text_config !== undefined && config.vision_config !== undefined)
  );
}

const pooledTextOutputs = ['text_embeds', 'text_embeddings', 'pooler_output'];
const pooledImageOutputs = ['image_embeds', 'image_embeddings', 'pooler_output'];

/**
 * The facts of an image-text model whose text (or joint) graph is `onnxPath`: the text tower's
 * feeds and output, the vision tower's, the image size and the vision sequence length.
 */
export async function readMultimodalFacts(
  dir: string,
  onnxPath: string,
  graph: GraphInterface,
  config: ModelConfig,
  tokenizerConfig: TokenizerConfig,
  label: string,
): Promise<MultimodalModelFacts> {
  const family = config.model_type as MultimodalFamily;
  if (!(multimodalFamilies as readonly string[]).includes(family)) {
    throw new ModelFilesError(
      `Model "${label}": config.json's model_type "${config.model_type ?? ''}" is an image-text model this server does not serve; it serves CLIP (clip), SigLIP (siglip) and jina-clip (jina_clip) models exactly.`,
    );
  }
  const preprocessorPath = join(dir, 'preprocessor_config.json');
  if (!existsSync(preprocessorPath)) {
    throw new ModelFilesError(
      `Model "${label}": a ${family} model needs preprocessor_config.json (how its images are resized and normalised), which ${dir} lacks. Pull the repository again, or copy the file from it.`,
    );
  }
  let processor: ImageProcessorSpec;
  try {
    processor = readImageProcessor(JSON.parse(readFileSync(preprocessorPath, 'utf8')), preprocessorPath);
  } catch (error) {
    throw new ModelFilesError(`Model "${label}": ${(error as Error).message}`);
  }
  const { height, width } = processor;

  const joint = graph.inputs.some((input) => input.name === 'pixel_values');
  const visionPath = joint ? onnxPath : visionGraphOf(onnxPath);
  if (!joint && !existsSync(visionPath)) {
    throw new ModelFilesError(
      `Model "${label}": its text tower ${basename(onnxPath)} has no vision tower beside it (${basename(visionPath)}), and the graph takes no pixel_values. Pull the repository again, so that both towers are fetched.`,
    );
  }
  let visionGraph: GraphInterface = graph;
  if (!joint) {
    try {
      visionGraph = await readGraphInterface(visionPath);
    } catch (error) {
      throw new ModelFilesError(
        `Model "${label}": ${visionPath} is not a readable ONNX model (${(error as Error).message}).`,
      );
    }
  }

  const textOutput = pooledOutput(graph.outputs, family === 'siglip' ? ['pooler_output'] : pooledTextOutputs);
  const imageOutput = pooledOutput(
    visionGraph.outputs,
    family === 'siglip' ? ['pooler_output'] : pooledImageOutputs,
    textOutput?.name,
  );
  if (!textOutput || !imageOutput) {
    const names = (outputs: TensorInfo[]) => outputs.map((o) => `"${o.name}"`).join(', ');
    throw new ModelFilesError(
      `Model "${label}": a ${family} model's graphs must give the pooled text vector (${(family === 'siglip' ? ['pooler_output'] : pooledTextOutputs).join(' or ')}) and the pooled image vector (${(family === 'siglip' ? ['pooler_output'] : pooledImageOutputs).join(' or ')}); the text graph gives ${names(graph.outputs)}${joint ? '' : `, the vision graph ${names(visionGraph.outputs)}`}.`,
    );
  }

  const pixels = visionGraph.inputs.find((input) => input.name === 'pixel_values');
  if (!pixels) {
    throw new ModelFilesError(
      `Model "${label}": the vision graph has no "pixel_values" input (inputs: ${visionGraph.inputs.map((i) => i.name).join(', ')}).`,
    );
  }
  if (pixels.type !== 'float32' && pixels.type !== 'float16')
    throw new ModelFilesError(`Model "${label}": "pixel_values" is ${pixels.type}; float32 or float16 expected.`);
  const fixed = pixels.shape.slice(2);
  if (
    fixed.length !== 2 ||
    (typeof fixed[0] === 'number' && fixed[0] !== height) ||
    (typeof fixed[1] === 'number' && fixed[1] !== width)
  ) {
    throw new ModelFilesError(
      `Model "${label}": the vision graph takes pixel_values of ${JSON.stringify(pixels.shape)}, but preprocessor_config.json makes ${height} x ${width} images.`,
    );
  }

  const ids = graph.inputs.find((input) => input.name === 'input_ids');
  if (!ids)
    throw new ModelFilesError(
      `Model "${label}": the text graph has no "input_ids" input (inputs: ${graph.inputs.map((i) => i.name).join(', ')}).`,
    );
  if (ids.type !== 'int64' && ids.type !== 'int32')
    throw new ModelFilesError(`Model "${label}": "input_ids" is ${ids.type}; int64 or int32 expected.`);
  const known = new Set(['input_ids', 'attention_mask', 'pixel_values']);
  const unknown = [...graph.inputs, ...(joint ? [] : visionGraph.inputs)].filter((input) => !known.has(input.name));
  if (unknown.length > 0) {
    throw new ModelFilesError(
      `Model "${label}": the graph takes inputs this server does not know how to feed: ${unknown.map((i) => `"${i.name}"`).join(', ')}.`,
    );
  }
  const attentionMask = graph.inputs.some((input) => input.name === 'attention_mask');
  // Batch sizes the graph ties by one symbolic name must match, else a dummy of one row does.
  const batchMatched =
    joint && ids.shape[0] !== undefined && ids.shape[0] === pixels.shape[0] && typeof ids.shape[0] === 'string';
  const maxTokens = textWindow(config, tokenizerConfig, label);
  const feeds: GraphFeeds = {
    idType: ids.type,
    tokenTypeIds: false,
    positionIds: false,
    pastKeyValues: [],
    attentionMask,
    // SigLIP's text tower was trained on texts padded to max_length: its vectors are of such rows.
    ...(family === 'siglip' ? { fixedLength: maxTokens } : {}),
    // CLIP's causal text tower ignores what follows a row; jina's mean pools over every position.
    ...(!attentionMask && family === 'jina_clip' ? { uniformLength: true } : {}),
    ...(joint ? { pixelDummy: { type: pixels.type, height, width, batchMatched } } : {}),
  };

  const textWidth = lastDim(textOutput) ?? config.projection_dim ?? config.text_config?.hidden_size ?? 0;
  const imageWidth = lastDim(imageOutput) ?? config.projection_dim ?? config.vision_config?.hidden_size ?? 0;
  if (textWidth !== imageWidth) {
    throw new ModelFilesError(
      `Model "${label}": its text vectors ("${textOutput.name}") are ${textWidth} wide and its image vectors ("${imageOutput.name}") ${imageWidth}: they are not in one vector space.`,
    );
  }
  return {
    output: { info: textOutput, pooled: true },
    width: textWidth,
    maxTokens,
    vocabSize: config.text_config?.vocab_size ?? config.vocab_size ?? 0,
    feeds,
    multimodal: {
      family,
      processor,
      vision: {
        onnxPath: visionPath,
        joint,
        output: { name: imageOutput.name, type: imageOutput.type },
        pixelType: pixels.type,
        height,
        width,
        sequenceLength: visionSequenceLength(family, config, visionGraph, height, width, label),
        ...(joint ? { textDummy: { idType: ids.type, batchMatched } } : {}),
        externalData: joint ? [] : visionGraph.externalData,
      },
    },
  };
}

/** The vision tower's graph beside a text tower's: `text_model*.onnx` -> `vision_model*.onnx`. */
export function visionGraphOf(textGraph: string): string {
  const name = basename(textGraph);
  return join(dirname(textGraph), name.startsWith('text_model') ? `vision${name.slice('text'.length)}` : name);
}

function pooledOutput(outputs: TensorInfo[], names: string[], not?: string): TensorInfo | undefined {
  return (
    names.map((name) => outputs.find((o) => o.name === name && o.name !== not)).find((o) => o !== undefined) ??
    // A two-tower export's towers may both say pooler_output: the other tower's name is no clash there.
    names.map((name) => outputs.find((o) => o.name === name)).find((o) => o !== undefined)
  );
}

function lastDim(info: TensorInfo): number | undefined {
  const last = info.shape[info.shape.length - 1];
  return typeof last === 'number' && last > 0 ? last : undefined;
}

/** The text tower's window: the tightest of the tokenizer's and the position table's. */
function textWindow(config: ModelConfig, tokenizerConfig: TokenizerConfig, label: string): number {
  const windows = [
    tokenizerConfig.model_max_length !== undefined && tokenizerConfig.model_max_length < 1e6
      ? tokenizerConfig.model_max_length
      : undefined,
    config.text_config?.max_position_embeddings,
  ].filter((n): n is number => n !== undefined && Number.isInteger(n) && n > 0);
  if (windows.length === 0)
    throw new ModelFilesError(
      `Model "${label}": neither config.json's text_config nor the tokenizer files say how many tokens it takes.`,
    );
  return Math.min(...windows);
}

/**
 * Tokens one image is to the vision tower: the graph's own sequence length where it states it,
 * else (image / patch)^2 patches, plus the class token CLIP and jina-clip's EVA tower prepend
 * (SigLIP has none).
 */
function visionSequenceLength(
  family: MultimodalFamily,
  config: ModelConfig,
  graph: GraphInterface,
  height: number,
  width: number,
  label: string,
): number {
  const hidden = graph.outputs.find((o) => o.name === 'last_hidden_state' || o.name === 'vision_last_hidden_state');
  if (hidden && typeof hidden.shape[1] === 'number' && hidden.shape[1] > 0) return hidden.shape[1];
  const patch = config.vision_config?.patch_size;
  if (!patch) throw new ModelFilesError(`Model "${label}": config.json's vision_config does not say its patch_size.`);
  const patches = Math.floor(height / patch) * Math.floor(width / patch);
  return patches + (family === 'siglip' ? 0 : 1);
}
