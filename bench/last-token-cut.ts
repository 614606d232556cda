/**
 * What cutting a causal LM reranker's graph to its answer logits at the last token saves
 * (onnx/last-token-logits.ts), on a model folder holding a Qwen3-Reranker export (a real-size
 * stand-in: `npx tsx bench/last-token-cut.ts <models dir>/stand-ins/onnx-community/Qwen3-Reranker-0.6B-ONNX`,
 * after `onnx-gateway bench --stand-in onnx-community/Qwen3-Reranker-0.6B-ONNX` or make_standins.py --size real).
 *
 * Each measure runs in a process of its own, so that its peak resident memory is its own:
 * - `serve`: the server's path (startCore, rerank of `--docs` documents of `--tokens` tokens):
 *   resident memory before loading, once loaded and warmed up, and its peak while reranking.
 * - `cut` and `whole`: raw ONNX Runtime, one pair of `--tokens` tokens, `--repeats` runs: seconds
 *   per pair and peak memory, on the cut graph and on the whole one (logits over the vocabulary).
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as ort from 'onnxruntime-node';
import { loadConfig } from '../src/config.js';
import { rerank } from '../src/core/rerank.js';
import { startCore } from '../src/main.js';
import { lastTokenGraph } from '../src/models/yes-no-rerankers.js';
import { readGraphInterface } from '../src/onnx/interface.js';

const args = process.argv.slice(2);
const flag = (name: string, fallback: number) => {
  const at = args.indexOf(`--${name}`);
  return at >= 0 ? Number(args[at + 1]) : fallback;
};
const folder = args.find((a) => !a.startsWith('--') && !/^\d+$/.test(a))!;
const docs = flag('docs', 8);
const tokens = flag('tokens', 1024);
const repeats = flag('repeats', 2);
const mode = args.includes('--child') ? args[args.indexOf('--child') + 1] : undefined;
const rssMb = () => Math.round(process.memoryUsage.rss() / 2 ** 20);
const peakMb = () => Math.round(process.resourceUsage().maxRSS / 1024);

/** Right-padded feeds of one row of `length` tokens with an empty cache, as the server feeds a causal LM. */
async function feeds(graph: string, length: number): Promise<Record<string, ort.Tensor>> {
  const ids = BigInt64Array.from({ length }, (_, i) => BigInt(100 + (i % 3000)));
  const dims = [1, length];
  const result: Record<string, ort.Tensor> = {
    input_ids: new ort.Tensor('int64', ids, dims),
    attention_mask: new ort.Tensor('int64', new BigInt64Array(length).fill(1n), dims),
    position_ids: new ort.Tensor(
      'int64',
      BigInt64Array.from({ length }, (_, i) => BigInt(i)),
      dims,
    ),
  };
  for (const input of (await readGraphInterface(graph)).inputs)
    if (input.name.startsWith('past_key_values.'))
      result[input.name] = new ort.Tensor(
        'float32',
        new Float32Array(0),
        input.shape.map((d, i) => (i === 0 ? 1 : typeof d === 'number' ? d : 0)),
      );
  return result;
}

async function raw(graph: string): Promise<object> {
  const before = rssMb();
  const session = await ort.InferenceSession.create(graph, { intraOpNumThreads: 2 });
  const loaded = rssMb();
  const input = await feeds(graph, tokens);
  const seconds: number[] = [];
  for (let i = 0; i < repeats; i++) {
    const started = performance.now();
    const out = await session.run(input);
    seconds.push((performance.now() - started) / 1000);
    for (const t of Object.values(out)) t.dispose();
  }
  return { graph: basename(graph), beforeMb: before, loadedMb: loaded, peakMb: peakMb(), secondsPerPair: seconds };
}

async function serve(): Promise<object> {
  const modelsDir = dirname(dirname(folder));
  const id = `${basename(dirname(folder))}/${basename(folder)}`;
  const config = loadConfig({ models: [id], modelsDir, workers: 1, intraOpThreads: 2, logLevel: 'silent' });
  const before = rssMb();
  const started = await startCore(config);
  await started.ready;
  // The model is loaded on its first request: a short one.
  await rerank(started.core, { model: id, query: 'warm up', documents: ['a short document'] });
  const loaded = rssMb();
  const loadedPeak = peakMb();
  const model = started.registry.resolve(id, 'rerank');
  // Documents of `tokens` tokens with the template: cut to the window less its fixed parts and the lead.
  const text = 'protein folding research '.repeat(tokens);
  const template = model.rerankTemplate!;
  const lead = model.tokenizer.encode(template.lead(template.defaultInstruction, 'what is protein folding?'));
  const fixed =
    template.prefixIds.length + template.separatorIds.length + template.suffixIds(template.defaultInstruction).length;
  const room = tokens - fixed - lead.length;
  const documentIds = model.tokenizer.encode(template.documentPrefix + text).subarray(0, room);
  const document = model.tokenizer.decode(documentIds).trimStart();
  const begun = performance.now();
  const result = await rerank(started.core, {
    model: id,
    query: 'what is protein folding?',
    documents: Array.from({ length: docs }, () => document),
  });
  const seconds = (performance.now() - begun) / 1000;
  await started.engine.close();
  return {
    graph: basename(model.onnxPath),
    documents: docs,
    tokensPerPair: result.totalTokens / result.pairs,
    beforeMb: before,
    loadedMb: loaded,
    loadedPeakMb: loadedPeak,
    peakMb: peakMb(),
    peakOverLoaded: Math.round((peakMb() / loaded) * 100) / 100,
    secondsPerPair: seconds / result.pairs,
  };
}

async function child(which: string): Promise<void> {
  const whole = join(folder, 'onnx', 'model.onnx');
  const result = which === 'serve' ? await serve() : await raw(which === 'whole' ? whole : await cutGraph(whole));
  process.stdout.write(JSON.stringify({ mode: which, ...result }) + '\n');
}

async function cutGraph(whole: string): Promise<string> {
  const vocab = JSON.parse(readFileSync(join(folder, 'vocab.json'), 'utf8')) as Record<string, number>;
  return lastTokenGraph(whole, [vocab['yes']!, vocab['no']!]).path;
}

if (mode) {
  await child(mode);
} else {
  const self = fileURLToPath(import.meta.url);
  for (const which of ['serve', 'cut', 'whole']) {
    const run = spawnSync(process.execPath, [...process.execArgv, self, ...args, '--child', which], {
      stdio: ['ignore', 'pipe', 'inherit'],
      encoding: 'utf8',
    });
    process.stdout.write(run.stdout);
  }
}
