/**
 * The int8 variant of a model folder: `onnx/model_int8.onnx`, quantized from its fp32 graph.
 *
 * Why that name and not the Hub's `onnx/model_quantized.onnx`: the latter is a file some Hub
 * repositories ship, made by their authors with their own settings. Ours is named apart so that
 * either can be told from the other on disk, and a pull never overwrites ours or ours theirs. The
 * registry serves `id:int8` from ours when present, else from the Hub's.
 */
import { existsSync, statSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import { quantizeFile, type QuantizeReport } from '../onnx/quantize.js';
import { onnxFiles } from './registry.js';

export const INT8_FILE = onnxFiles.int8[0]!;

export interface Int8Plan {
  /** The fp32 graph read. */
  input: string;
  /** The int8 graph written (replaced atomically if it exists). */
  output: string;
  /** The model id, when the target is a model folder (served as `<id>:int8`). */
  id?: string;
}

export class Int8Error extends Error {
  override name = 'Int8Error';
}

/**
 * What `target` names: a model id in the models dir, a model folder, or an .onnx file (whose
 * int8 twin goes beside it as `<name>_int8.onnx`).
 */
export function planInt8(target: string, modelsDir: string): Int8Plan {
  const inModelsDir = resolve(modelsDir, target);
  const folder = !target.includes(':') && existsSync(inModelsDir) ? inModelsDir : existsSync(target) ? resolve(target) : undefined;
  if (!folder) {
    throw new Int8Error(`"${target}" is neither a model in ${resolve(modelsDir)} nor a file or folder. Pull the model first ("onnx-gateway models pull <id>").`);
  }
  if (statSync(folder).isFile()) {
    if (!folder.endsWith('.onnx')) throw new Int8Error(`${folder} is not an .onnx file.`);
    return { input: folder, output: join(dirname(folder), `${basename(folder, '.onnx')}_int8.onnx`) };
  }
  const fp32 = onnxFiles.fp32.map((file) => join(folder, file)).find((path) => existsSync(path));
  if (!fp32) throw new Int8Error(`${folder} has no fp32 graph (${onnxFiles.fp32.join(' or ')}) to quantize.`);
  return { input: fp32, output: join(folder, INT8_FILE), id: basename(folder) };
}

export async function quantizeToInt8(plan: Int8Plan): Promise<QuantizeReport> {
  try {
    await mkdir(dirname(plan.output), { recursive: true });
    return await quantizeFile(plan.input, plan.output);
  } catch (error) {
    throw new Int8Error(`Can not quantize ${(error as Error).message}`, { cause: error });
  }
}
