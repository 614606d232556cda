/**
 * `onnx-gateway embed INPUT --model M --output OUT.jsonl`: embeds a corpus without a client. INPUT
 * is a JSONL file (each line's `text`, or the field `--field` names; its `id`, else the line
 * number), a text file (one input a line, the line number its id) or a folder of .txt / .md files
 * (the relative path its id). OUT gets one JSON line per input, `{"id", "embedding"}`, in input
 * order, or, named `.npy`, the vectors as float32 rows with the ids in `.ids.txt` beside it
 * (embed-output.ts); written a slice at a time: Ctrl-C (or a kill) leaves valid files, and
 * `--resume` goes on from them, embedding nothing twice.
 */
import { createReadStream, existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { createInterface } from 'node:readline';
import cliProgress from 'cli-progress';
import type { Command } from 'commander';
import { loadConfig, settings } from '../config.js';
import { embed } from '../core/embeddings.js';
import { isApiError } from '../errors.js';
import { startCore } from '../main.js';
import { openSink, sinkFiles } from './embed-output.js';
import { exitOnStartupError } from './exit.js';

interface EmbedOptions {
  model: string;
  output: string;
  field: string;
  dimensions?: string;
  longInputs?: string;
  resume?: boolean;
  modelsDir?: string;
  models?: string;
  workers?: string;
}

interface Input {
  id: string;
  text: string;
}

/** Inputs embedded per call; two calls are in flight so the workers never wait for the next. */
const slice = 256;

/** The inputs of INPUT, in order, streamed (a folder's files are read one at a time). */
async function* readInputs(path: string, field: string): AsyncGenerator<Input> {
  if (statSync(path).isDirectory()) {
    const files = readdirSync(path, { recursive: true, encoding: 'utf8' })
      .filter((name) => /\.(txt|md)$/i.test(name))
      .sort();
    for (const name of files)
      yield { id: relative(path, join(path, name)), text: readFileSync(join(path, name), 'utf8') };
    return;
  }
  const jsonl = /\.jsonl$/i.test(path);
  let number = 0;
  for await (const line of createInterface({ input: createReadStream(path), crlfDelay: Infinity })) {
    number += 1;
    if (line.trim() === '') continue;
    if (!jsonl) {
      yield { id: String(number), text: line };
      continue;
    }
    const record = JSON.parse(line) as Record<string, unknown>;
    const text = record[field];
    if (typeof text !== 'string') throw new Error(`${path}:${number}: the field "${field}" is not a string.`);
    yield {
      id: typeof record.id === 'string' || typeof record.id === 'number' ? String(record.id) : String(number),
      text,
    };
  }
}

/** How many inputs INPUT has, for the progress bar (a pass over the file that parses nothing). */
async function countInputs(path: string): Promise<number> {
  if (statSync(path).isDirectory())
    return readdirSync(path, { recursive: true, encoding: 'utf8' }).filter((n) => /\.(txt|md)$/i.test(n)).length;
  let count = 0;
  for await (const line of createInterface({ input: createReadStream(path), crlfDelay: Infinity }))
    if (line.trim() !== '') count += 1;
  return count;
}

export function registerEmbedCommand(program: Command): void {
  program
    .command('embed')
    .argument('<input>', 'a .jsonl file, a text file (one input a line) or a folder of .txt / .md files')
    .description(
      'embed a corpus into a JSONL file of {"id", "embedding"} lines or a .npy file (ids beside it), with progress; resumable',
    )
    .requiredOption('--model <id>', 'the embedding model (a catalogue id or a model folder in the models dir)')
    .requiredOption(
      '--output <file>',
      'the output file: JSONL, or .npy (float32 rows in input order, the ids one a line in <name>.ids.txt)',
    )
    .option('--field <name>', 'the field of a JSONL input that holds the text', 'text')
    .option('--dimensions <n>', "the first N dimensions, renormalised (default: the model's width)")
    .option(
      '--long-inputs <mode>',
      "inputs longer than the model's window: truncate (the default), chunk (embedded in windows, averaged) or refuse (the command stops)",
    )
    .option('--resume', 'go on from an existing output file: inputs whose id it holds are skipped')
    .option('--models-dir <dir>', `${settings.modelsDir.description} (env ${settings.modelsDir.env})`)
    .option('--workers <n>', `${settings.workers.description} (env ${settings.workers.env})`)
    .action(async (input: string, options: EmbedOptions) => {
      let config;
      try {
        config = loadConfig({
          models: options.model,
          modelsDir: options.modelsDir,
          workers: options.workers,
          logLevel: 'silent',
          // Inputs longer than the model's window are cut, as the server does by default, unless --long-inputs says otherwise.
          longInputs: options.longInputs,
          cacheMaxMb: 0,
        });
      } catch (error) {
        exitOnStartupError(error);
      }
      const existing = sinkFiles(options.output).find((file) => existsSync(file));
      if (existing && !options.resume) fail(`${existing} exists: pass --resume to go on from it.`);
      const dimensions = options.dimensions === undefined ? undefined : Number(options.dimensions);
      let sink;
      try {
        sink = openSink(options.output, options.resume === true);
      } catch (error) {
        fail((error as Error).message);
      }
      const done = sink.done;
      let started: Awaited<ReturnType<typeof startCore>> | undefined;
      const stop = new AbortController();
      // Ctrl-C: the slices in flight finish and are written, then the command ends; the file is whole.
      const interrupt = () => stop.abort();
      process.once('SIGINT', interrupt);
      process.once('SIGTERM', interrupt);
      const total = await countInputs(input);
      const bar = new cliProgress.SingleBar(
        {
          format: 'embedding {bar} {value}/{total} inputs | {speed} inputs/s | {eta_formatted} left',
          stream: process.stderr,
          etaBuffer: 50,
          hideCursor: true,
        },
        cliProgress.Presets.shades_classic,
      );
      let written = done.size;
      try {
        started = await startCore(config, {}, (message) => process.stderr.write(`onnx-gateway: ${message}\n`));
        await started.ready;
        const core = started.core;
        const since = performance.now();
        bar.start(total, written, { speed: '0' });
        const inFlight: Promise<{ ids: string[]; vectors: Float32Array; dimensions: number }>[] = [];
        const write = async () => {
          const answered = await inFlight.shift()!;
          sink.write(answered.ids, answered.vectors, answered.dimensions);
          written += answered.ids.length;
          const seconds = (performance.now() - since) / 1000;
          bar.update(written, { speed: ((written - done.size) / Math.max(seconds, 0.001)).toFixed(0) });
        };
        const run = (batch: Input[]) =>
          embed(core, { model: options.model, input: batch.map((i) => i.text), dimensions }).then((result) => ({
            ids: batch.map((i) => i.id),
            vectors: result.vectors,
            dimensions: result.dimensions,
          }));
        let pending: Input[] = [];
        for await (const item of readInputs(input, options.field)) {
          if (stop.signal.aborted) break;
          if (done.has(item.id)) continue;
          pending.push(item);
          if (pending.length < slice) continue;
          inFlight.push(run(pending));
          pending = [];
          if (inFlight.length >= 2) await write();
        }
        if (pending.length > 0 && !stop.signal.aborted) inFlight.push(run(pending));
        while (inFlight.length > 0) await write();
        bar.stop();
        const left = total - written;
        process.stderr.write(
          stop.signal.aborted
            ? `interrupted: ${written} of ${total} inputs in ${sink.files}; run again with --resume to finish.\n`
            : `embedded ${written - done.size} inputs into ${sink.files}${left > 0 ? ` (${left} skipped as repeated ids)` : ''}\n`,
        );
      } catch (error) {
        bar.stop();
        if (isApiError(error)) fail(error.message);
        exitOnStartupError(error);
      } finally {
        sink.close();
        await started?.engine.close();
        process.off('SIGINT', interrupt);
        process.off('SIGTERM', interrupt);
      }
      if (stop.signal.aborted) process.exit(130);
    });
}

function fail(message: string): never {
  process.stderr.write(`onnx-gateway: ${message}\n`);
  process.exit(2);
}
