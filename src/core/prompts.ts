/**
 * Prompts: the text put before an input, as sentence-transformers' `encode(prompt_name=...)` does.
 * A request names a prompt by our `input_type` (query or document) or by the model's own prompt
 * name (TEI's `prompt_name`); with neither, the model's `default_prompt_name` applies.
 */
import { invalid } from '../errors.js';
import type { ServedModel } from '../models/registry.js';

/** The names models give their query and document prompts, in order of preference. */
const promptNames: Record<'query' | 'document', string[]> = {
  query: ['query', 'search_query', 'retrieval.query'],
  document: ['document', 'passage', 'search_document', 'corpus', 'retrieval.passage'],
};

/** The prompt for an input type or prompt name; '' when the model has none for it. */
export function promptFor(model: ServedModel, name: string | undefined, param = 'input_type'): string {
  if (name === undefined) return model.defaultPromptName ? (model.prompts[model.defaultPromptName] ?? '') : '';
  // Own names only: "constructor" is `in` every object, and would put a function's source before the input.
  if (Object.hasOwn(model.prompts, name)) return model.prompts[name]!;
  if (name === 'query' || name === 'document') {
    const found = promptNames[name].find((candidate) => Object.hasOwn(model.prompts, candidate));
    return found ? model.prompts[found]! : '';
  }
  const known = Object.keys(model.prompts);
  throw invalid(
    param,
    `"${model.id}" has no prompt named "${name}"; its prompts: ${known.length > 0 ? known.join(', ') : 'none'} (or input_type query / document).`,
  );
}
