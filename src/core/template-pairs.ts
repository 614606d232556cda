/**
 * The inputs of a yes/no reranker (Qwen3-Reranker, bge-reranker-v2-gemma): each (query, document
 * window) written in the model's template, `prefix + lead(instruction, query) + separator +
 * documentPrefix + window + suffix(instruction)`, as its reference code writes it. The lead and the
 * document are tokenised apart (Qwen3's lead ends where the pre-tokenizer splits anyway; the gemma
 * reference tokenises them apart), so that a long document is cut into windows of its own tokens and
 * scores as its best window, as for cross-encoders.
 *
 * The references cut the document to what the window leaves, which keeps the lead and the start of
 * the document: the first window here. (FlagLLMReranker also cuts a query to 3/4 of its max_length;
 * here a lead is cut only past half the window's room, as for cross-encoders.)
 */
import { invalid } from '../errors.js';
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
  const instruction = request.instruction ?? template.defaultInstruction;
  const { prefixIds, separatorIds } = template;
  const suffixIds = template.suffixIds(instruction);
  const fixed = prefixIds.length + separatorIds.length + suffixIds.length;
  // An instruction among the fixed parts must leave the query and the document room.
  if (fixed > maxTokens / 2)
    throw invalid(
      'instruction',
      `With this instruction the template's fixed parts take ${fixed} tokens; at most ${Math.floor(maxTokens / 2)} may, half the model's window of ${maxTokens}, the rest being the query's and the document's.`,
    );
  const lead = tokenizer.encode(template.lead(instruction, request.query));
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
        let at = 0;
        for (const part of [prefixIds, kept, separatorIds, window, suffixIds]) {
          ids.set(part, at);
          at += part.length;
        }
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
