/**
 * The image pipelines this server serves: each configured id resolved to its manifest (the
 * catalogue's, or a `pipeline.json` in its folder) and its graph in the image models dir.
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { ApiError } from '../errors.js';
import { ModelFilesError } from './facts.js';
import {
  ImageCatalogue,
  pipelineGraph,
  pipelineManifestFile,
  validateImageManifest,
  type ImageManifest,
  type ServedImageModel,
} from './image-catalogue.js';

function howToGet(id: string, manifest: ImageManifest | undefined, dir: string): string {
  const target = join(dir, id, pipelineGraph);
  if (!manifest) return `No manifest in models/images/ names "${id}" (known: see models/images/).`;
  const note = manifest.source.note ? ` (${manifest.source.note})` : '';
  return `Download it with "onnx-gateway models pull ${id}", or fetch ${manifest.source.url}${note} to ${target} (sha256 ${manifest.source.sha256}).`;
}

/** The image pipelines this server serves, by id. */
export class ImageRegistry {
  private readonly models = new Map<string, ServedImageModel>();

  constructor(models: ServedImageModel[]) {
    for (const model of models) this.models.set(model.id, model);
  }

  /**
   * Resolves each configured id to its manifest and file; stops with every problem at once. A
   * folder may carry its own manifest as `pipeline.json` (a model the catalogue does not know).
   */
  static load(ids: string[], dir: string, catalogue: ImageCatalogue = ImageCatalogue.load()): ImageRegistry {
    const errors: string[] = [];
    const models: ServedImageModel[] = [];
    for (const id of ids) {
      const ownManifest = join(resolve(dir, id), pipelineManifestFile);
      let manifest: ImageManifest | undefined;
      try {
        manifest = existsSync(ownManifest)
          ? validateImageManifest(JSON.parse(readFileSync(ownManifest, 'utf8')), `${id}/${pipelineManifestFile}`)
          : catalogue.get(id);
      } catch (error) {
        errors.push(`Image pipeline "${id}": ${(error as Error).message}`);
        continue;
      }
      const onnxPath = resolve(dir, id, pipelineGraph);
      if (!manifest) {
        errors.push(
          `Image pipeline "${id}" is unknown: models/images/ has no manifest for it and ${ownManifest} does not exist (known: ${
            catalogue
              .list()
              .map((m) => m.id)
              .join(', ') || 'none'
          }).`,
        );
      } else if (!existsSync(onnxPath)) {
        errors.push(
          `Image pipeline "${id}" is not usable: ${onnxPath} does not exist. ${howToGet(id, manifest, resolve(dir))}`,
        );
      } else {
        models.push({
          id,
          onnxPath,
          input: manifest.input,
          output: manifest.output,
          manifest,
          created: Math.floor(statSync(onnxPath).mtimeMs / 1000),
        });
      }
    }
    if (errors.length > 0) throw new ModelFilesError(errors.join('\n'));
    return new ImageRegistry(models);
  }

  list(): ServedImageModel[] {
    return [...this.models.values()];
  }

  get size(): number {
    return this.models.size;
  }

  /** The pipeline a request names. */
  resolve(name: string, param = 'model'): ServedImageModel {
    const model = this.models.get(name);
    if (!model) {
      const served = this.list().map((m) => m.id);
      throw new ApiError(
        'model_not_found',
        `The image model "${name}" is not served here. Served image models: ${served.join(', ') || 'none (set ONNX_GATEWAY_IMAGE_MODELS)'}.`,
        { param },
      );
    }
    return model;
  }
}
