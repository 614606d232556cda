/**
 * Usage of an image edit, deterministic and documented:
 * - text tokens: the prompt's tokens under the served text model's tokenizer (no special tokens);
 * - image tokens: one per started 64x64-pixel tile of an image: of each input image as decoded
 *   (after EXIF orientation), and of each output image as returned.
 * Output text tokens are always 0 (`revised_prompt` is a description, not generated text).
 */
import type { Size } from './options.js';

/** The edge of the pixel tile that counts as one image token. */
export const imageTokenTile = 64;

export function imageTokens(size: Size): number {
  return Math.ceil(size.width / imageTokenTile) * Math.ceil(size.height / imageTokenTile);
}

export interface ImageUsage {
  input_tokens: number;
  input_tokens_details: { image_tokens: number; text_tokens: number };
  output_tokens: number;
  output_tokens_details: { image_tokens: number; text_tokens: number };
  total_tokens: number;
}

export function imageUsage(promptTokens: number, inputs: readonly Size[], outputs: readonly Size[]): ImageUsage {
  const inputImages = inputs.reduce((sum, size) => sum + imageTokens(size), 0);
  const outputImages = outputs.reduce((sum, size) => sum + imageTokens(size), 0);
  const input = inputImages + promptTokens;
  return {
    input_tokens: input,
    input_tokens_details: { image_tokens: inputImages, text_tokens: promptTokens },
    output_tokens: outputImages,
    output_tokens_details: { image_tokens: outputImages, text_tokens: 0 },
    total_tokens: input + outputImages,
  };
}
