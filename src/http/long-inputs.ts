/**
 * The request fields of the embedding routes about inputs past the model's window
 * (core/long-inputs.ts, core/late-chunking.ts): on /v1/embeddings, the engine path, TEI's /embed,
 * Cohere's /v2/embed and Ollama's /api/embed alike.
 */
import { Type } from 'typebox';
import { longInputsModes } from '../core/long-inputs.js';
import { LiteralUnion } from './schemas.js';

export const longInputsFields = {
  long_inputs: Type.Optional(
    LiteralUnion(longInputsModes, {
      description:
        "An input longer than the model's window: truncate cuts it; chunk embeds its tokens in consecutive windows and averages their vectors, weighted by their tokens (dense vectors only; usage counts every window's tokens); refuse answers 400 input_too_long. Absent: the route's truncate field if it has one, else the server's longInputs setting. Chunked vectors are not what the model was trained on.",
    }),
  ),
  late_chunking: Type.Optional(
    Type.Boolean({
      description:
        "Late chunking: the texts run as one sequence (each tokenised alone, the model's special tokens around them all) and each text's vector is the mean of its own tokens' vectors. For mean-pooling models; the texts together must fit the window (else 400 input_too_long). Not what the model was trained on.",
    }),
  ),
};
