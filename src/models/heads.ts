/**
 * Which kinds of output a model gives, read from its files beside the pooling facts: one vector
 * per input (`dense`), a sparse vector over the vocabulary (`sparse`), or one vector per token
 * (`tokens`). A model may give several (an encoder's token vectors beside its pooled one; a
 * bge-m3-style export's token weights beside its dense vector); a SPLADE model gives only sparse
 * vectors and a ColBERT model only token vectors.
 *
 * - SPLADE: sentence-transformers' MLMTransformer + SpladePooling modules, or a *ForMaskedLM
 *   config without a Pooling module whose graph outputs `logits` [batch, seq, vocab].
 * - Token weights (bge-m3's lexical weights, as community exports name them): an output
 *   `sparse_vecs`, `sparse_weights` or `token_weights` [batch, seq(, 1)].
 * - ColBERT (PyLate's layout: a `pylate.` module, or query_length / document_length in
 *   config_sentence_transformers.json): the projected token vectors; the graph must contain the
 *   projection (its width is the Dense module's out_features).
 */
import type { ElementType, TensorInfo } from '../onnx/interface.js';
import type { ModelConfig, SentenceTransformersConfig, SpladePoolingConfig, StModules } from './file-schemas.js';

export type OutputKind = 'dense' | 'sparse' | 'tokens';
export const outputKinds: readonly OutputKind[] = ['dense', 'sparse', 'tokens'];

/** How token scores become a sparse vector over the vocabulary, inside the worker. */
export interface SparseHead {
  /** `mlm`: max over tokens of log(1 + relu(logit)) per vocabulary entry; `weights`: relu of each token's weight, max per token id. */
  pooling: 'mlm' | 'weights';
  output: string;
  /** Vocabulary size: the sparse vectors' dimension. */
  dimension: number;
}

export interface TokenHead {
  output: string;
  type: ElementType;
  width: number;
}

export interface ModelHeads {
  kinds: OutputKind[];
  sparse?: SparseHead;
  tokens?: TokenHead;
}

/** PyLate's ColBERT settings, as config_sentence_transformers.json states them (tokens by their text). */
export interface LateInteractionFacts {
  queryPrefix: string;
  documentPrefix: string;
  queryLength: number;
  documentLength: number;
  /** Whether the [MASK] tokens that pad a query are attended (colbert-ir's attend_to_mask_tokens). */
  attendToExpansion: boolean;
  /** Pad queries with [MASK] to queryLength. */
  queryExpansion: boolean;
  /** Tokens left out of documents (PyLate: string.punctuation). */
  skiplistWords: string[];
  maskToken: string;
}

export const tokenWeightOutputs = ['sparse_vecs', 'sparse_weights', 'token_weights'];

/**
 * Whether the files describe a SPLADE model (masked-LM logits pooled to the vocabulary): its
 * sentence-transformers modules say so, or (older repositories without them) a *ForMaskedLM config
 * whose graph outputs `logits`. Many dense embedders keep the *ForMaskedLM of the checkpoint they
 * were trained from (all-mpnet-base-v2), so the architecture alone does not decide.
 */
export function isSplade(config: ModelConfig, modules: StModules, outputs: TensorInfo[]): boolean {
  if (modules.some((m) => /SpladePooling|MLMTransformer/.test(m.type ?? ''))) return true;
  const pooled = modules.some((m) => m.type?.endsWith('.Pooling'));
  return (
    !pooled &&
    (config.architectures ?? []).some((a) => a.endsWith('ForMaskedLM')) &&
    outputs.some((o) => o.name === 'logits')
  );
}

/** Whether the files describe a PyLate ColBERT model. */
export function isLateInteraction(modules: StModules, stConfig: SentenceTransformersConfig | undefined): boolean {
  return (
    modules.some((m) => m.type?.startsWith('pylate.')) ||
    (stConfig?.query_length !== undefined && stConfig.document_length !== undefined)
  );
}

/** What SpladePooling's config says, refused where it is not the max of log(1 + relu). */
export function checkSpladePooling(pooling: SpladePoolingConfig | undefined): string | undefined {
  if (!pooling) return undefined;
  if (pooling.pooling_strategy !== undefined && pooling.pooling_strategy !== 'max')
    return `its SpladePooling uses pooling_strategy "${pooling.pooling_strategy}"; only "max" is served`;
  if (pooling.activation_function !== undefined && pooling.activation_function !== 'relu')
    return `its SpladePooling uses activation_function "${pooling.activation_function}"; only "relu" is served`;
  return undefined;
}

export function lateInteractionFacts(
  stConfig: SentenceTransformersConfig | undefined,
  maskToken: string | undefined,
): LateInteractionFacts {
  const st = stConfig ?? {};
  return {
    queryPrefix: st.query_prefix ?? '[Q] ',
    documentPrefix: st.document_prefix ?? '[D] ',
    queryLength: st.query_length ?? 32,
    documentLength: st.document_length ?? 180,
    attendToExpansion: st.attend_to_expansion_tokens === true,
    queryExpansion: st.do_query_expansion !== false,
    skiplistWords: st.skiplist_words ?? [...'!"#$%&\'()*+,-./:;<=>?@[\\]^_`{|}~'],
    maskToken: maskToken ?? '[MASK]',
  };
}

/** The graph output of the token weights of a bge-m3-style export, if it has one. */
export function tokenWeightsOutput(outputs: TensorInfo[]): TensorInfo | undefined {
  return tokenWeightOutputs.map((name) => outputs.find((o) => o.name === name)).find((o) => o !== undefined);
}

/** The last dimension of an output when the graph fixes it. */
export function lastDim(info: TensorInfo): number | undefined {
  const last = info.shape[info.shape.length - 1];
  return typeof last === 'number' && last > 0 ? last : undefined;
}
