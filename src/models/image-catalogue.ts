/**
 * The catalogue of image pipelines: manifests of known image-to-image models (one JSON file each in
 * `models/images/`), and the shapes of a served one (image-registry.ts resolves them to their files).
 *
 * A manifest holds the facts pre- and post-processing need and the graph does not say: which
 * tensor to feed and fetch, the colour and value range the model expects, the scale, and whether
 * the graph takes one fixed size or any.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { manifestsDir } from './catalogue.js';

export type ImageTask = 'super-resolution' | 'background-removal' | 'style-transfer';
export const imageTasks: readonly ImageTask[] = ['super-resolution', 'background-removal', 'style-transfer'];

export interface ImageInputSpec {
  name: string;
  /** `rgb`: three channels; `luma`: the Y of BT.601 YCbCr, one channel. */
  channels: 'rgb' | 'luma';
  /** The one [height, width] the graph takes; absent when height and width are dynamic. */
  size?: [number, number];
  /** What the model is fed: (pixel - mean) / std, pixels in 0..255. */
  mean: number;
  std: number;
}

export interface ImageOutputSpec {
  name: string;
  /** Pixels are value * scale, clamped to 0..255. */
  scale: number;
}

export interface ImageManifest {
  id: string;
  task: ImageTask;
  description: string;
  /** Where the ONNX file comes from, and its checksum. */
  source: { url: string; sha256: string; note?: string };
  licence: string;
  input: ImageInputSpec;
  output: ImageOutputSpec;
  /** Output edge / input edge of one pass (1 for same-size models). */
  scale: number;
  /** Tile edge and overlap (input pixels) for models that run on tiles. */
  tile?: { size: number; overlap: number };
  /** Style transfer: the style's name, as prompts may say it. */
  style?: string;
  /** Style transfer: the long edge the image is stylised at (brush strokes are this many pixels wide relative to it). */
  workingEdge?: number;
}

/** What a worker needs to open one image model. Plain data: it crosses into worker threads. */
export interface ImageModelSpec {
  id: string;
  onnxPath: string;
  input: ImageInputSpec;
  output: ImageOutputSpec;
}

export interface ServedImageModel extends ImageModelSpec {
  manifest: ImageManifest;
  created: number;
}

export const imageManifestsDir = join(manifestsDir, 'images');

/** Where a pipeline's graph lives in its folder, as for the text models. */
export const pipelineGraph = 'onnx/model.onnx';
/** A manifest inside a model's folder, for pipelines the catalogue does not list. */
export const pipelineManifestFile = 'pipeline.json';

export class ImageCatalogue {
  private readonly manifests = new Map<string, ImageManifest>();

  constructor(manifests: ImageManifest[]) {
    for (const manifest of manifests) this.manifests.set(manifest.id, manifest);
  }

  static load(dir: string = imageManifestsDir): ImageCatalogue {
    if (!existsSync(dir)) return new ImageCatalogue([]);
    const manifests = readdirSync(dir)
      .filter((name) => name.endsWith('.json'))
      .sort()
      .map((name) => validateImageManifest(JSON.parse(readFileSync(join(dir, name), 'utf8')), `models/images/${name}`));
    return new ImageCatalogue(manifests);
  }

  get(id: string): ImageManifest | undefined {
    return this.manifests.get(id);
  }

  list(): ImageManifest[] {
    return [...this.manifests.values()];
  }
}

export function validateImageManifest(value: unknown, file: string): ImageManifest {
  const m = value as ImageManifest;
  const fail = (why: string): never => {
    throw new Error(`${file}: ${why}`);
  };
  if (typeof m !== 'object' || m === null) fail('not a JSON object');
  if (typeof m.id !== 'string' || !/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(m.id)) fail('id must be a plain name');
  if (!imageTasks.includes(m.task)) fail(`task must be one of ${imageTasks.join(', ')}`);
  if (!m.input || typeof m.input.name !== 'string' || (m.input.channels !== 'rgb' && m.input.channels !== 'luma'))
    fail('input needs a name and channels "rgb" or "luma"');
  if (typeof m.input.mean !== 'number' || typeof m.input.std !== 'number' || m.input.std === 0)
    fail('input needs a numeric mean and a non-zero std');
  if (
    m.input.size !== undefined &&
    !(
      Array.isArray(m.input.size) &&
      m.input.size.length === 2 &&
      m.input.size.every((n) => Number.isInteger(n) && n > 0)
    )
  )
    fail('input.size must be [height, width]');
  if (!m.output || typeof m.output.name !== 'string' || typeof m.output.scale !== 'number')
    fail('output needs a name and a scale');
  if (!Number.isInteger(m.scale) || m.scale < 1) fail('scale must be a positive integer');
  if (m.tile && !(m.tile.size > 2 * m.tile.overlap && m.tile.overlap >= 0))
    fail('tile.size must be more than twice tile.overlap');
  if (m.task === 'super-resolution' && m.scale < 2) fail('a super-resolution model must scale by 2 or more');
  if (m.task === 'background-removal' && m.input.channels !== 'rgb') fail('background removal takes RGB');
  if (m.task === 'style-transfer' && !m.style) fail('a style-transfer model needs a style name');
  return m;
}
