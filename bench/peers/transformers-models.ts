/**
 * The transformers.js peer's model code, written the way a Node developer would: the
 * `feature-extraction` pipeline with mean pooling + normalize for embeddings, and
 * AutoTokenizer + AutoModelForSequenceClassification over (query, document) pairs for rerank.
 * Models load from the local models dir only (no Hub).
 */
import {
  AutoModelForSequenceClassification,
  AutoTokenizer,
  env,
  pipeline,
  type PreTrainedModel,
  type PreTrainedTokenizer,
  type Tensor,
} from '@huggingface/transformers';
import { modelsDir } from '../lib/common.js';

env.allowRemoteModels = false;
env.allowLocalModels = true;
env.localModelPath = modelsDir().endsWith('/') ? modelsDir() : `${modelsDir()}/`;

export interface TransformersPeer {
  embed(texts: string[]): Promise<{ vectors: Float32Array; dim: number; tokens: number }>;
  rerank(query: string, documents: string[]): Promise<number[]>;
}

export async function loadTransformersPeer(
  embedModel: string | null,
  rerankModel: string | null,
): Promise<TransformersPeer> {
  const extractor = embedModel
    ? await pipeline<'feature-extraction'>('feature-extraction', embedModel, { dtype: 'fp32', local_files_only: true })
    : null;
  let rerankTokenizer: PreTrainedTokenizer | null = null;
  let rerankModelInstance: PreTrainedModel | null = null;
  if (rerankModel) {
    rerankTokenizer = await AutoTokenizer.from_pretrained(rerankModel, { local_files_only: true });
    rerankModelInstance = await AutoModelForSequenceClassification.from_pretrained(rerankModel, {
      dtype: 'fp32',
      local_files_only: true,
    });
  }
  return {
    async embed(texts) {
      if (!extractor) throw new Error('no embedding model loaded');
      const out = await extractor(texts, { pooling: 'mean', normalize: true });
      const dim = out.dims[out.dims.length - 1]!;
      // Token count for `usage`, the way a developer would get it: tokenise again.
      const tokens = texts.reduce((acc, t) => acc + extractor.tokenizer.encode(t).length, 0);
      return { vectors: out.data as Float32Array, dim, tokens };
    },
    async rerank(query, documents) {
      if (!rerankTokenizer || !rerankModelInstance) throw new Error('no rerank model loaded');
      const inputs = rerankTokenizer(new Array<string>(documents.length).fill(query), {
        text_pair: documents,
        padding: true,
        truncation: true,
      });
      const { logits } = (await rerankModelInstance(inputs)) as { logits: Tensor };
      return Array.from(logits.data as Float32Array, (x) => 1 / (1 + Math.exp(-x)));
    },
  };
}
