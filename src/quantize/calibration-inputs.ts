/**
 * Calibration inputs for GPTQ rounding (`models quantize`): a text file, one text per line,
 * tokenized with the model's own tokenizer into what the model is fed in use. An embedder gets
 * each text alone; a cross-encoder gets (query, passage) pairs, with the file's short lines as
 * queries and the longer ones as passages. Each also gets a few long inputs made of consecutive
 * texts, so that positions deep in the window are seen too.
 *
 * Inputs are cut to a few fixed lengths and run in batches of equal length: no padding, whose
 * positions would otherwise count as calibration rows, and few runs (each returns K x K matrices).
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import * as ort from 'onnxruntime-node';
import { loadCalibrationTexts } from '../models/calibration-text.js';
import { TextTokenizer } from '../text/tokenizer.js';

export { DEFAULT_CALIBRATION_FILE, loadCalibrationTexts, readCalibrationTexts } from '../models/calibration-text.js';

/** Lines of at most this many words are a cross-encoder's queries; longer ones its passages. */
const QUERY_WORDS = 16;
/** Inputs are cut to the longest of these that fits (shorter inputs are kept whole: there are few). */
const LENGTHS = [8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512];
/** Longest calibration input, in tokens (or the model's window, if shorter). */
const LONGEST = 256;
/** Rows (tokens) per run at most. */
const ROWS_PER_RUN = 2048;

export interface CalibrationSet {
  /** Where the texts came from. */
  source: string;
  /** Model inputs (texts or pairs) and their tokens. */
  inputs: number;
  tokens: number;
  /** Feeds by graph input name, one run each. */
  runs: Record<string, ort.Tensor>[];
}

export type Sequence = { ids: Int32Array; typeIds?: Uint8Array };

/**
 * The calibration inputs for a model: texts alone (`embedding`) or (query, passage) pairs
 * (`rerank`), with special tokens, at most `maxTokens` long.
 */
export function calibrationSequences(
  texts: string[],
  tokenizer: TextTokenizer,
  task: 'embedding' | 'rerank',
  maxTokens: number,
): Sequence[] {
  const longest = Math.min(maxTokens, LONGEST);
  const encoded = texts.map((t) => tokenizer.encode(t)).filter((ids) => ids.length > 0);
  if (encoded.length === 0) return [];
  // Long inputs: runs of consecutive texts joined, about one per eight texts.
  const joined: Int32Array[] = [];
  for (let start = 0; start < encoded.length; start += 8) {
    const parts: Int32Array[] = [];
    let length = 0;
    for (let i = start; length < longest && parts.length < encoded.length; i = (i + 1) % encoded.length) {
      parts.push(encoded[i]!);
      length += encoded[i]!.length;
    }
    joined.push(concat(parts));
  }
  if (task === 'embedding') return [...encoded, ...joined].map((ids) => ({ ids: tokenizer.single(ids, longest) }));

  const words = (t: string) => t.split(/\s+/).length;
  const short = texts
    .map((t, i) => (words(t) <= QUERY_WORDS ? encoded[i] : undefined))
    .filter((ids): ids is Int32Array => !!ids?.length);
  const long = texts
    .map((t, i) => (words(t) > QUERY_WORDS ? encoded[i] : undefined))
    .filter((ids): ids is Int32Array => !!ids?.length);
  const queries = short.length > 0 ? short : encoded;
  const passages = [...(long.length > 0 ? long : encoded), ...joined];
  // Each passage with two different queries, spread over the list.
  const sequences: Sequence[] = [];
  for (const [p, passage] of passages.entries()) {
    for (const offset of [0, Math.ceil(queries.length / 2)]) {
      if (offset > 0 && queries.length < 2) continue;
      sequences.push(tokenizer.pair(queries[(p + offset) % queries.length]!, passage, longest));
    }
  }
  return sequences;
}

/**
 * Batches of equal-length inputs as feeds for the graph inputs named: each input is cut to the
 * longest of a few fixed lengths that it reaches (keeping its last token, the final separator).
 */
export function calibrationRuns(
  sequences: Sequence[],
  graphInputs: readonly string[],
): { runs: Record<string, ort.Tensor>[]; tokens: number } {
  const byLength = new Map<number, Sequence[]>();
  for (const s of sequences) {
    const n = s.ids.length;
    const length = [...LENGTHS].reverse().find((l) => l <= n) ?? n;
    const cut = length === n ? s : cutTo(s, length);
    const group = byLength.get(length);
    if (group) group.push(cut);
    else byLength.set(length, [cut]);
  }
  const runs: Record<string, ort.Tensor>[] = [];
  let tokens = 0;
  for (const [length, group] of [...byLength].sort((a, b) => a[0] - b[0])) {
    const perRun = Math.max(1, Math.floor(ROWS_PER_RUN / length));
    for (let start = 0; start < group.length; start += perRun) {
      const batch = group.slice(start, start + perRun);
      const dims = [batch.length, length];
      const ids = new BigInt64Array(batch.length * length);
      const types = new BigInt64Array(batch.length * length);
      batch.forEach((s, r) => {
        for (let t = 0; t < length; t++) {
          ids[r * length + t] = BigInt(s.ids[t]!);
          types[r * length + t] = BigInt(s.typeIds?.[t] ?? 0);
        }
      });
      const feeds: Record<string, ort.Tensor> = {};
      for (const name of graphInputs) {
        if (name === 'input_ids') feeds[name] = new ort.Tensor('int64', ids, dims);
        else if (name === 'attention_mask')
          feeds[name] = new ort.Tensor('int64', new BigInt64Array(ids.length).fill(1n), dims);
        else if (name === 'token_type_ids') feeds[name] = new ort.Tensor('int64', types, dims);
        else
          throw new Error(
            `the graph has an input "${name}" that calibration does not know how to feed (quantize with --no-calibration)`,
          );
      }
      runs.push(feeds);
      tokens += ids.length;
    }
  }
  return { runs, tokens };
}

/** The first `length - 1` tokens and the last one (the closing separator). */
function cutTo(s: Sequence, length: number): Sequence {
  const last = s.ids.length - 1;
  const ids = new Int32Array(length);
  ids.set(s.ids.subarray(0, length - 1));
  ids[length - 1] = s.ids[last]!;
  if (!s.typeIds) return { ids };
  const typeIds = new Uint8Array(length);
  typeIds.set(s.typeIds.subarray(0, length - 1));
  typeIds[length - 1] = s.typeIds[last]!;
  return { ids, typeIds };
}

function concat(parts: Int32Array[]): Int32Array {
  const out = new Int32Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/** Reads a calibration file; `undefined` for the shipped one. */
/**
 * The calibration set for the model whose tokenizer files are in `dir` and whose graph declares
 * `graphInputs` / `graphOutputs`: from `file`, or the shipped text.
 */
export async function calibrationSet(
  dir: string,
  graph: { inputs: string[]; outputs: string[] },
  file?: string,
): Promise<CalibrationSet> {
  const { source, texts } = await loadCalibrationTexts(file);
  const tokenizer = await TextTokenizer.fromDirectory(dir);
  const config = await readJson(join(dir, 'config.json'));
  const architectures = Array.isArray(config?.architectures) ? (config.architectures as string[]) : [];
  // A sequence-classification head (cross-encoder or classifier, both take pairs) is calibrated on pairs; without config.json, its output says.
  const task =
    architectures.some((a) => a.endsWith('ForSequenceClassification')) ||
    (architectures.length === 0 && graph.outputs.includes('logits'))
      ? 'rerank'
      : 'embedding';
  const window = typeof config?.max_position_embeddings === 'number' ? config.max_position_embeddings : LONGEST;
  const sequences = calibrationSequences(texts, tokenizer, task, Math.min(window, LONGEST));
  const { runs, tokens } = calibrationRuns(sequences, graph.inputs);
  return { source, inputs: sequences.length, tokens, runs };
}

async function readJson(path: string): Promise<Record<string, unknown> | undefined> {
  try {
    return JSON.parse(await readFile(path, 'utf8')) as Record<string, unknown>;
  } catch {
    return undefined;
  }
}
