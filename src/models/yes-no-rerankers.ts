/**
 * Rerankers that are language models asked whether a document answers a query, and scored by the
 * logits of their answer tokens: Qwen3-Reranker ("yes" against "no"; as a causal LM or converted to
 * sequence classification) and bge-reranker-v2-gemma (the logit of "Yes"). What they are, told from
 * their files and name; the template their reference code writes each pair in; and the causal LM's
 * graph cut to the answer logits at the last token (onnx/last-token-logits.ts), written once beside
 * the graph, or in the data dir where the model's folder can not be written.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { cutToLastTokenLogits } from '../onnx/last-token-logits.js';
import { readModel, writeModel } from '../onnx/model.js';
import type { TensorInfo } from '../onnx/interface.js';
import type { ModelConfig } from './file-schemas.js';

export type RerankTemplateName = 'qwen3-reranker' | 'bge-reranker-gemma';

/**
 * How a pair is written for the model, as its reference code writes it:
 * `prefix, lead(instruction, query), separator, documentPrefix + document, suffix(instruction)`.
 * The reference tokenises each of the fixed parts alone (special tokens included) and so does the
 * server, so that their ids are the reference's wherever a tokenizer would merge across them.
 */
export interface RerankTemplate {
  name: RerankTemplateName;
  /** Before every pair: texts each tokenised alone. */
  prefix: string[];
  /** The instruction when a request gives none: the model card's. */
  defaultInstruction: string;
  /** The text before the document (the query, and for some the instruction): cut for a long query. */
  lead(instruction: string, query: string): string;
  /** Between the lead and the document: texts each tokenised alone. */
  separator: string[];
  /** What joins the document to what is before it; tokenised with the document. */
  documentPrefix: string;
  /** After every pair: texts each tokenised alone (the instruction too, for some). */
  suffix(instruction: string): string[];
  /** The answer tokens whose logits are read, the positive first. */
  answers: string[];
}

const qwen3System =
  'Judge whether the Document meets the requirements based on the Query and the Instruct provided. ' +
  'Note that the answer can only be "yes" or "no".';

export const rerankTemplates: Record<RerankTemplateName, RerankTemplate> = {
  // Qwen/Qwen3-Reranker-*'s model card: format_instruction between its prefix and suffix.
  'qwen3-reranker': {
    name: 'qwen3-reranker',
    prefix: [`<|im_start|>system\n${qwen3System}<|im_end|>\n<|im_start|>user\n`],
    defaultInstruction: 'Given a web search query, retrieve relevant passages that answer the query',
    // The lead ends at "<Document>:"; Qwen2's pre-tokenizer splits there (a run of punctuation ends
    // at the space), so lead and " {doc}" tokenised apart give the ids of the whole text.
    lead: (instruction, query) => `<Instruct>: ${instruction}\n<Query>: ${query}\n<Document>:`,
    separator: [],
    documentPrefix: ' ',
    suffix: () => ['<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n'],
    answers: ['yes', 'no'],
  },
  // FlagEmbedding's FlagLLMReranker: `<bos>`, "A: {query}", "\n", "B: {passage}", "\n", the prompt
  // (the request's instruction replaces it), each tokenised alone; the score is the logit of "Yes".
  'bge-reranker-gemma': {
    name: 'bge-reranker-gemma',
    prefix: ['<bos>'],
    defaultInstruction:
      "Given a query A and a passage B, determine whether the passage contains an answer to the query by providing a prediction of either 'Yes' or 'No'.",
    lead: (_instruction, query) => `A: ${query}`,
    separator: ['\n'],
    documentPrefix: 'B: ',
    suffix: (instruction) => ['\n', instruction],
    answers: ['Yes'],
  },
};

/** The template of a causal LM of this `model_type` named a reranker. */
const causalTemplates: Record<string, RerankTemplateName> = {
  qwen3: 'qwen3-reranker',
  gemma: 'bge-reranker-gemma',
  gemma2: 'bge-reranker-gemma',
};

/** What makes a model a yes/no reranker, from its files. */
export interface YesNoFacts {
  template: RerankTemplateName;
  /** A causal LM whose graph gives logits over the vocabulary (cut at load), not a classification head. */
  causal: boolean;
}

/**
 * Whether the model is a yes/no reranker: a Qwen3 or Gemma causal LM whose graph outputs `logits`
 * over the vocabulary, named a reranker (by its manifest's task, or "reranker" in its name, as every
 * Qwen3-Reranker and bge-reranker-v2-gemma repository is), or a Qwen3 sequence classifier served as
 * a reranker (the seq-cls conversions, which read the same template). `refused` says why a causal
 * LM named a reranker can not be served.
 */
export function yesNoRerankerOf(
  config: ModelConfig,
  outputs: TensorInfo[],
  name: string,
  task: 'embedding' | 'rerank' | 'classify',
): YesNoFacts | { refused: string } | undefined {
  const architectures = config.architectures ?? [];
  const logits = outputs.find((o) => o.name === 'logits');
  const causal =
    architectures.some((a) => a.endsWith('ForCausalLM')) && logits !== undefined && logits.shape.length === 3;
  const named = task === 'rerank' || /reranker/i.test(name);
  if (causal && named) {
    const template = causalTemplates[config.model_type ?? ''];
    if (template) return { template, causal: true };
    return {
      refused: `it is a ${config.model_type ?? 'unknown'} causal LM named a reranker; yes/no rerankers are served for Qwen3 (Qwen3-Reranker) and Gemma (bge-reranker-v2-gemma)`,
    };
  }
  if (
    task === 'rerank' &&
    config.model_type === 'qwen3' &&
    architectures.some((a) => a.endsWith('ForSequenceClassification'))
  )
    return { template: 'qwen3-reranker', causal: false };
  return undefined;
}

/** Where a cut graph is, and where its external data is when not beside it. */
export interface CutGraph {
  path: string;
  /** The original graph's folder, when the cut graph is elsewhere (the session is told to read weights there). */
  externalDataDir?: string;
}

/**
 * The causal LM's graph cut to the logits of `answerIds` at the last token, as
 * `<graph>.answers-<ids>.onnx`; kept while newer than the graph. Written beside the graph (its
 * external data stays where the graph names it); where the model's folder can not be written (a
 * read-only mount), in a folder of its own under `fallbackDir`, its external data still read from
 * the graph's folder.
 */
export function lastTokenGraph(onnxPath: string, answerIds: readonly number[], fallbackDir?: string): CutGraph {
  const name = `${basename(onnxPath).replace(/\.onnx$/, '')}.answers-${answerIds.join('-')}.onnx`;
  const beside = join(dirname(onnxPath), name);
  // One folder per graph, named by its absolute path.
  const elsewhere = fallbackDir
    ? join(fallbackDir, createHash('sha256').update(resolve(onnxPath)).digest('hex').slice(0, 16), name)
    : undefined;
  const inFallback = (path: string): CutGraph => ({ path, externalDataDir: resolve(dirname(onnxPath)) });
  const graphTime = statSync(onnxPath).mtimeMs;
  if (existsSync(beside) && statSync(beside).mtimeMs >= graphTime) return { path: beside };
  if (elsewhere && existsSync(elsewhere) && statSync(elsewhere).mtimeMs >= graphTime) return inFallback(elsewhere);

  const model = readModel(readFileSync(onnxPath));
  cutToLastTokenLogits(model, answerIds);
  const bytes = writeModel(model);
  try {
    writeAtomically(beside, bytes);
    return { path: beside };
  } catch (error) {
    if (!elsewhere) throw error;
  }
  mkdirSync(dirname(elsewhere), { recursive: true });
  writeAtomically(elsewhere, bytes);
  return inFallback(elsewhere);
}

function writeAtomically(path: string, bytes: Uint8Array): void {
  const partial = `${path}.partial`;
  writeFileSync(partial, bytes);
  renameSync(partial, path);
}
