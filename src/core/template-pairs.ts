/**
 * The inputs of a yes/no reranker (Qwen3-Reranker): each (query, document window) written in the
 * model's template, `prefix + lead(instruction, query) + documentPrefix + window + suffix`, as its
 * reference code writes it. The lead and the document are tokenised apart (the template's lead ends
 * where the pre-tokenizer splits anyway), so that a long document is cut into windows of its own
 * tokens and scores as its best window, as for cross-encoders.
 *
 * The reference cuts the formatted text to the window less prefix and suffix, which keeps the
 * lead and the start of the document: the first window here.
 */
import type { ResolvedRerankTemplate, ServedModel } from '../models/registry.js';
import { chunkPair, type ChunkOptions } from '../text/chunking.js';
import { mapInSlices } from './map-in-slices.js';

export interface TemplatePairs {
  inputs: { ids: Int32Array; typeIds: Uint8Array }[];
  /** The document of each input. */
  owners: number[];
  leadTokens: number;
  documentTokens: number;
}

export async function templatePairs(
  model: ServedModel,
  template: ResolvedRerankTemplate,
  request: { query: string; instruction?: string; documents: string[]; maxTokensPerDoc?: number },
  options: Omit<ChunkOptions, 'overlap'> & { overlap: number },
  signal?: AbortSignal,
): Promise<TemplatePairs> {
  const { tokenizer, maxTokens } = model;
  const { prefixIds, suffixIds } = template;
  const fixed = prefixIds.length + suffixIds.length;
  const lead = tokenizer.encode(template.lead(request.instruction ?? template.defaultInstruction, request.query));
  const room = maxTokens - fixed;
  const chunkOptions = { ...options, overlap: Math.min(options.overlap, Math.floor(room / 4)) };
  let documentTokens = 0;
  const perDocument = await mapInSlices(
    request.documents,
    (doc) => {
      let docIds = tokenizer.encode(template.documentPrefix + doc);
      if (request.maxTokensPerDoc !== undefined && docIds.length > request.maxTokensPerDoc)
        docIds = docIds.subarray(0, request.maxTokensPerDoc);
      documentTokens += docIds.length;
      return chunkPair(lead, docIds, maxTokens, fixed, chunkOptions).map((window) => {
        // A lead over half the room is cut to what the window leaves (chunkPair sizes windows so).
        const kept = lead.subarray(0, Math.min(lead.length, room - window.length));
        const ids = new Int32Array(fixed + kept.length + window.length);
        ids.set(prefixIds, 0);
        ids.set(kept, prefixIds.length);
        ids.set(window, prefixIds.length + kept.length);
        ids.set(suffixIds, prefixIds.length + kept.length + window.length);
        return { ids, typeIds: new Uint8Array(ids.length) };
      });
    },
    signal,
  );
  const inputs: TemplatePairs['inputs'] = [];
  const owners: number[] = [];
  perDocument.forEach((pairs, index) => {
    for (const pair of pairs) {
      inputs.push(pair);
      owners.push(index);
    }
  });
  return { inputs, owners, leadTokens: lead.length, documentTokens };
}
