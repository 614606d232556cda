/**
 * How a request picks its pipeline. `model` naming a served image model picks it, whatever the
 * prompt says. Without a model (or with "auto"), the prompt picks: a served style's name, then
 * words about the background, then words about size or detail, in that order (the first match
 * wins; a prompt matching none is refused, saying what can be asked for). The prompt is never
 * read for anything else: `revised_prompt` says what was actually done.
 */
import { ApiError } from '../errors.js';
import type { ImageTask, ServedImageModel } from '../models/image-catalogue.js';
import type { ImageRegistry } from '../models/image-registry.js';

const taskWords: Record<ImageTask, RegExp> = {
  'background-removal':
    /\b(remove|replace|erase|delete|strip|swap|change|put|place|transparent|no|without)\b[^.]{0,40}\b(background|backdrop|bg)\b|\bbackground (removal|remover)\b|\b(cut[- ]?out|transparent|isolate|matte|composite)\b/i,
  'super-resolution':
    /\b(upscal\w*|up-?sampl\w*|super[- ]?resolution|enlarge\w*|resolution|sharpen\w*|enhance\w*|bigger|larger|[248]k|u?hd)\b/i,
  'style-transfer': /\b(styl\w*|painting|paint|artistic|art)\b/i,
};

/** Words a style may be called by: "rain-princess" is also "rain princess". */
function styleNames(model: ServedImageModel): string[] {
  const style = model.manifest.style;
  if (!style) return [];
  return [...new Set([style, style.replace(/-/g, ' ')])];
}

export function choosePipeline(pipelines: ImageRegistry, model: string | undefined, prompt: string): ServedImageModel {
  if (model !== undefined && model !== '' && model !== 'auto') return pipelines.resolve(model);
  const served = pipelines.list();
  if (served.length === 0)
    throw new ApiError('model_not_found', 'No image models are served here (set ONNX_GATEWAY_IMAGE_MODELS).', {
      param: 'model',
    });

  const text = prompt.toLowerCase();
  const byStyle = served.find((m) =>
    styleNames(m).some((name) => new RegExp(`\\b${name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\b`).test(text)),
  );
  if (byStyle) return byStyle;
  for (const task of ['background-removal', 'super-resolution', 'style-transfer'] as const) {
    if (!taskWords[task].test(prompt)) continue;
    const candidates = served.filter((m) => m.manifest.task === task);
    if (task === 'style-transfer' && candidates.length > 1) {
      throw new ApiError(
        'invalid_request',
        `Name a style in the prompt or pick a model: the served styles are ${candidates.map((m) => m.manifest.style).join(', ')}.`,
        { param: 'prompt' },
      );
    }
    if (candidates[0]) return candidates[0];
  }
  throw new ApiError(
    'invalid_request',
    `The prompt asks for nothing this server can do. It can: ${describeOffer(served)}. Name one in the prompt, or set "model" to a served image model (${served.map((m) => m.id).join(', ')}).`,
    { param: 'prompt' },
  );
}

function describeOffer(served: ServedImageModel[]): string {
  const offers: string[] = [];
  if (served.some((m) => m.manifest.task === 'super-resolution')) offers.push('upscale ("upscale to 4K")');
  if (served.some((m) => m.manifest.task === 'background-removal'))
    offers.push(
      'remove the background ("remove the background"; with two images, put the first one\'s subject on the second)',
    );
  const styles = served.filter((m) => m.manifest.task === 'style-transfer').map((m) => m.manifest.style);
  if (styles.length > 0) offers.push(`restyle (${styles.map((s) => `"${s} style"`).join(', ')})`);
  return offers.join('; ');
}
