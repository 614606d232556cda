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
import { basename, dirname, isAbsolute, join, resolve } from 'node:path';
import { StartupError } from '../errors.js';
import type { Catalogue } from '../models/catalogue.js';
import { modelDir } from '../models/paths.js';
import { variantCandidates } from '../models/variants.js';
import type { OnnxModel } from '../onnx/model.js';
import { calibrationSet } from './calibration-inputs.js';
import { collectInputStats } from './calibration-stats.js';
import { quantizeFile, type QuantizeReport } from './graph.js';
import type { CalibrationSummary } from './report.js';

export const INT8_FILE = variantCandidates('int8')[0]!;

export interface Int8Plan {
  /** The fp32 graph read. */
  input: string;
  /** The int8 graph written (replaced atomically if it exists). */
  output: string;
  /** The model id, when the target is a model folder (served as `<id>:int8`). */
  id?: string;
  /** The folder with the model's tokenizer.json (for calibration), if there is one. */
  tokenizerDir?: string;
}

export interface Int8Options {
  /** The calibration text file; undefined: the shipped one; false: none (round to nearest). */
  calibration?: string | false;
  /** Progress lines. */
  log?: (line: string) => void;
}

export class Int8Error extends StartupError {
  override name = 'Int8Error';
  readonly code = 'quantize_failed';
}

/**
 * What `target` names: a model id in the models dir, a model folder, or an .onnx file (whose
 * int8 twin goes beside it as `<name>_int8.onnx`).
 */
export function planInt8(target: string, modelsDir: string, catalogue?: Catalogue): Int8Plan {
  const inModelsDir = modelDir(modelsDir, target, catalogue);
  const isModel = !target.includes(':') && !isAbsolute(target) && existsSync(inModelsDir);
  const folder = isModel ? inModelsDir : existsSync(target) ? resolve(target) : undefined;
  if (!folder) {
    throw new Int8Error(
      `"${target}" is neither a model in ${resolve(modelsDir)} nor a file or folder. Pull the model first ("onnx-gateway models pull <id>").`,
    );
  }
  const hasTokenizer = (dir: string) => existsSync(join(dir, 'tokenizer.json'));
  if (statSync(folder).isFile()) {
    if (!folder.endsWith('.onnx')) throw new Int8Error(`${folder} is not an .onnx file.`);
    // A graph in a model folder's onnx/ has its tokenizer one level up.
    const tokenizerDir = [dirname(folder), dirname(dirname(folder))].find(hasTokenizer);
    return { input: folder, output: join(dirname(folder), `${basename(folder, '.onnx')}_int8.onnx`), tokenizerDir };
  }
  const fp32 = variantCandidates('fp32')
    .map((file) => join(folder, file))
    .find((path) => existsSync(path));
  if (!fp32)
    throw new Int8Error(`${folder} has no fp32 graph (${variantCandidates('fp32').join(' or ')}) to quantize.`);
  return {
    input: fp32,
    output: join(folder, INT8_FILE),
    id: isModel ? target : basename(folder),
    tokenizerDir: hasTokenizer(folder) ? folder : undefined,
  };
}

/**
 * Writes the int8 graph. With calibration (the default), the weights are rounded with GPTQ on
 * statistics from running the fp32 graph over the calibration texts; that needs the model's
 * tokenizer: without one, the shipped text is skipped (rounding to nearest, as the report says)
 * and a file asked for is an error.
 */
export async function quantizeToInt8(plan: Int8Plan, options: Int8Options = {}): Promise<QuantizeReport> {
  let summary: CalibrationSummary | undefined;
  let uncalibrated: string | undefined = options.calibration === false ? 'calibration turned off' : undefined;
  if (typeof options.calibration === 'string' && !existsSync(options.calibration))
    throw new Int8Error(`The calibration file ${options.calibration} does not exist.`);
  if (options.calibration !== false && !plan.tokenizerDir) {
    if (options.calibration !== undefined)
      throw new Int8Error(
        `Can not calibrate ${plan.input}: no tokenizer.json beside it (or in the folder above) to tokenize ${options.calibration} with.`,
      );
    uncalibrated = 'no tokenizer.json beside the graph to tokenize calibration text with';
  }
  const calibrate =
    uncalibrated === undefined
      ? async (model: OnnxModel, targets: Map<string, number>) => {
          const started = performance.now();
          const graph = model.graph ?? {};
          const set = await calibrationSet(
            plan.tokenizerDir!,
            {
              inputs: (graph.input ?? []).map((v) => v.name ?? ''),
              outputs: (graph.output ?? []).map((v) => v.name ?? ''),
            },
            options.calibration || undefined,
          );
          options.log?.(`calibrating: ${set.inputs} inputs (${set.tokens} tokens) from ${set.source}`);
          const stats = await collectInputStats(model, targets, set.runs);
          summary = {
            source: set.source,
            inputs: set.inputs,
            tokens: set.tokens,
            seconds: (performance.now() - started) / 1000,
          };
          options.log?.(`rounding with GPTQ`);
          return stats;
        }
      : undefined;
  try {
    await mkdir(dirname(plan.output), { recursive: true });
    const report = await quantizeFile(plan.input, plan.output, { calibrate });
    return { ...report, ...(summary ? { calibration: summary } : {}), ...(uncalibrated ? { uncalibrated } : {}) };
  } catch (error) {
    throw new Int8Error(`Can not quantize ${(error as Error).message}`, { cause: error });
  }
}
