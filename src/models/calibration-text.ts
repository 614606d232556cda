/**
 * The shipped calibration text (models/calibration/english.txt: varied everyday and technical
 * English, written for this project), one text per line. It calibrates GPTQ rounding in `models
 * quantize` and the per-dimension ranges of int8 / uint8 embeddings.
 */
import { readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const DEFAULT_CALIBRATION_FILE = join(
  dirname(fileURLToPath(import.meta.url)),
  '..',
  '..',
  'models',
  'calibration',
  'english.txt',
);

/** The texts of a calibration file: its non-blank lines. */
export function readCalibrationTexts(content: string): string[] {
  return content
    .split(/\r?\n/)
    .map((line) => line.trim())
    .filter((line) => line.length > 0);
}

/** The texts of `file`, or of the shipped one; a file without any is an error. */
export async function loadCalibrationTexts(file?: string): Promise<{ source: string; texts: string[] }> {
  const path = file ?? DEFAULT_CALIBRATION_FILE;
  const texts = readCalibrationTexts(await readFile(path, 'utf8'));
  if (texts.length === 0) throw new Error(`${path} holds no text (one calibration text per line)`);
  return { source: path, texts };
}
