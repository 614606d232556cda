/**
 * Rerankers that are language models asked whether a document answers a query, and scored by the
 * logits of their answer tokens ("yes" / "no"): Qwen3-Reranker, as a causal LM or converted to
 * sequence classification. What they are, told from their files and name; the template their
 * reference code writes each pair in; and the causal LM's graph cut to the answer logits at the
 * last token (onnx/last-token-logits.ts), written once beside the graph.
 */
import { existsSync, readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { cutToLastTokenLogits } from '../onnx/last-token-logits.js';
import { readModel, writeModel } from '../onnx/model.js';
import type { TensorInfo } from '../onnx/interface.js';
import type { ModelConfig } from './file-schemas.js';

export type RerankTemplateName = 'qwen3-reranker';

/** How a pair is written for the model, as its reference code writes it. */
export interface RerankTemplate {
  name: RerankTemplateName;
  /** Before and after every pair, tokenised as they are (special tokens included). */
  prefix: string;
  suffix: string;
  /** The instruction when a request gives none: the model card's. */
  defaultInstruction: string;
  /** The text before the document: the instruction and the query. */
  lead(instruction: string, query: string): string;
  /** What joins the document to the lead; tokenised with the document. */
  documentPrefix: string;
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
    prefix: `<|im_start|>system\n${qwen3System}<|im_end|>\n<|im_start|>user\n`,
    suffix: '<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n',
    defaultInstruction: 'Given a web search query, retrieve relevant passages that answer the query',
    // The lead ends at "<Document>:"; Qwen2's pre-tokenizer splits there (a run of punctuation ends
    // at the space), so lead and " {doc}" tokenised apart give the ids of the whole text.
    lead: (instruction, query) => `<Instruct>: ${instruction}\n<Query>: ${query}\n<Document>:`,
    documentPrefix: ' ',
    answers: ['yes', 'no'],
  },
};

/** What makes a model a yes/no reranker, from its files. */
export interface YesNoFacts {
  template: RerankTemplateName;
  /** A causal LM whose graph gives logits over the vocabulary (cut at load), not a classification head. */
  causal: boolean;
}

/**
 * Whether the model is a yes/no reranker: a Qwen3 causal LM whose graph outputs `logits` over the
 * vocabulary, named a reranker (by its manifest's task, or "reranker" in its name, as every
 * Qwen3-Reranker repository is), or a Qwen3 sequence classifier served as a reranker (the
 * seq-cls conversions, which read the same template). `refused` says why a causal LM named a
 * reranker can not be served.
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
    if (config.model_type === 'qwen3') return { template: 'qwen3-reranker', causal: true };
    return {
      refused: `it is a ${config.model_type ?? 'unknown'} causal LM named a reranker; yes/no rerankers are served for Qwen3 (Qwen3-Reranker) only`,
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

/**
 * The causal LM's graph cut to the logits of `answerIds` at the last token, written beside it (its
 * external data stays where the graph names it) as `<graph>.answers-<ids>.onnx`; kept while newer
 * than the graph. Returns its path.
 */
export function lastTokenGraph(onnxPath: string, answerIds: readonly number[]): string {
  const stem = basename(onnxPath).replace(/\.onnx$/, '');
  const path = join(dirname(onnxPath), `${stem}.answers-${answerIds.join('-')}.onnx`);
  if (existsSync(path) && statSync(path).mtimeMs >= statSync(onnxPath).mtimeMs) return path;
  const model = readModel(readFileSync(onnxPath));
  cutToLastTokenLogits(model, answerIds);
  const partial = `${path}.partial`;
  writeFileSync(partial, writeModel(model));
  renameSync(partial, path);
  return path;
}
