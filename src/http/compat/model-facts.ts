/**
 * What other servers' model descriptions say that our own do not: the architecture family and
 * class labels from the model's config.json, and the size and date of its ONNX file. Read once,
 * when the routes are registered.
 */
import { createHash } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { ServedModel } from '../../models/registry.js';

export interface ModelFacts {
  /** config.json's `model_type` (bert, xlm-roberta, ...). */
  family: string;
  /** Class labels of a classifier or reranker, by index. */
  id2label: Record<string, string>;
  /** Bytes of the ONNX file. */
  size: number;
  modifiedAt: Date;
  /** Identifies this version of the model file (its path, size and time), as a sha256 hex digest. */
  digest: string;
  /** Parameters, estimated from the file size and the weights' width. */
  parameters: number;
}

export function readModelFacts(model: ServedModel): ModelFacts {
  let config: { model_type?: unknown; id2label?: unknown } = {};
  try {
    config = JSON.parse(readFileSync(join(model.dir, 'config.json'), 'utf8'));
  } catch {
    // The registry already read it to load the model; a model without it has no family to tell.
  }
  const stat = statSync(model.onnxPath);
  const id2label =
    config.id2label && typeof config.id2label === 'object' ? Object.fromEntries(Object.entries(config.id2label).map(([k, v]) => [k, String(v)])) : { 0: 'LABEL_0' };
  return {
    family: typeof config.model_type === 'string' ? config.model_type : 'unknown',
    id2label,
    size: stat.size,
    modifiedAt: stat.mtime,
    digest: createHash('sha256').update(`${model.onnxPath}\n${stat.size}\n${stat.mtimeMs}`).digest('hex'),
    parameters: Math.round(stat.size / (model.variant === 'int8' ? 1 : 4)),
  };
}

/** 22713216 -> "22.7M", as Ollama writes parameter sizes. */
export function formatParameters(count: number): string {
  if (count >= 1e9) return `${(count / 1e9).toFixed(1)}B`;
  if (count >= 1e6) return `${(count / 1e6).toFixed(1)}M`;
  if (count >= 1e3) return `${(count / 1e3).toFixed(1)}K`;
  return String(count);
}
