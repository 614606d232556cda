/**
 * `onnx-gateway embed INPUT --model M --output OUT.jsonl`: embeds a corpus without a client. INPUT
 * is a JSONL file (each line's `text`, or the field `--field` names; its `id`, else the line
 * number), a text file (one input a line, the line number its id) or a folder of .txt / .md files
 * (the relative path its id). OUT gets one JSON line per input, `{"id", "embedding"}`, in input
 * order, or, named `.npy`, the vectors as float32 rows with the ids in `.ids.txt` beside it
 * (embed-output.ts); written a slice at a time: Ctrl-C (or a kill) leaves valid files, and
 * `--resume` goes on from them, embedding nothing twice. With `--server URL` a running server
 * embeds them through its Batch API instead (embed-remote.ts), into the same files.
 */
import { existsSync } from 'node:fs';
import cliProgress from 'cli-progress';
import type { Command } from 'commander';
import { loadConfig, settings, type Config } from '../config.js';
import type { CoreContext } from '../core/context.js';
import { embed } from '../core/embeddings.js';
import { longInputsModes } from '../core/long-inputs.js';
import { isApiError } from '../errors.js';
import { startCore } from '../main.js';
import { countInputs, readInputs, type Input } from './embed-inputs.js';
import { openSink, sinkFiles, type EmbeddingSink } from './embed-output.js';
import { embedOnServer, RemoteError } from './embed-remote.js';
import { exitOnStartupError } from './exit.js';

interface EmbedOptions {
  model: string;
  output: string;
  field: string;
  dimensions?: string;
  longInputs?: string;
  resume?: boolean;
  server?: string;
  apiKey?: string;
  batchLines: string;
  modelsDir?: string;
  models?: string;
  workers?: string;
}

/** Inputs embedded per call; two calls are in flight so the workers never wait for the next. */
const slice = 256;

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
    .option(
      '--server <url>',
      "use a running server's Files and Batch APIs instead of loading the model here (the model must be one it serves)",
    )
    .option('--api-key <key>', 'Bearer key for --server (default: env ONNX_GATEWAY_API_KEY)')
    .option(
      '--batch-lines <n>',
      "with --server: the most inputs in one batch (cut lower at once if the server's batchMaxRequests is lower)",
      '50000',
    )
    .option('--models-dir <dir>', `${settings.modelsDir.description} (env ${settings.modelsDir.env})`)
    .option('--workers <n>', `${settings.workers.description} (env ${settings.workers.env})`)
    .action(async (input: string, options: EmbedOptions) => {
      let config: Config | undefined;
      if (options.server === undefined)
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
      else if (options.longInputs !== undefined && !(longInputsModes as string[]).includes(options.longInputs))
        fail(`--long-inputs (longInputs) must be one of ${longInputsModes.join(', ')}; got "${options.longInputs}".`);
      const batchLines = Number(options.batchLines);
      if (!Number.isInteger(batchLines) || batchLines < 1)
        fail(`--batch-lines must be a whole number above 0; got "${options.batchLines}".`);
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
      // Ctrl-C: the slices in flight (or the server's batch, cancelled) are written, then the command ends; the file is whole.
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
      const since = performance.now();
      // `answered` inputs of this run are done (embedded, or failed on the server).
      const progress = (answered: number) => {
        const seconds = (performance.now() - since) / 1000;
        bar.update(done.size + answered, { speed: (answered / Math.max(seconds, 0.001)).toFixed(0) });
      };
      let failed = 0;
      try {
        let embedded: number;
        if (options.server !== undefined) {
          bar.start(total, done.size, { speed: '0' });
          const counts = await embedOnServer(
            {
              server: options.server,
              apiKey: options.apiKey ?? process.env.ONNX_GATEWAY_API_KEY,
              model: options.model,
              dimensions,
              longInputs: options.longInputs,
              batchLines,
              pollMs: 1000,
            },
            {
              inputs: readInputs(input, options.field),
              done,
              sink,
              signal: stop.signal,
              progress,
              // On a terminal the bar is drawn again below the message.
              warn: (message) => process.stderr.write(`\nonnx-gateway: ${message}\n`),
            },
          );
          embedded = counts.embedded;
          failed = counts.failed;
        } else {
          started = await startCore(config!, {}, (message) => process.stderr.write(`onnx-gateway: ${message}\n`));
          await started.ready;
          bar.start(total, done.size, { speed: '0' });
          embedded = await embedInProcess(started.core, readInputs(input, options.field), {
            model: options.model,
            dimensions,
            done,
            sink,
            signal: stop.signal,
            progress,
          });
        }
        bar.stop();
        const written = done.size + embedded;
        const left = total - written - failed;
        process.stderr.write(
          stop.signal.aborted
            ? `interrupted: ${written} of ${total} inputs in ${sink.files}; run again with --resume to finish.\n`
            : `embedded ${embedded} inputs into ${sink.files}${left > 0 ? ` (${left} skipped as repeated ids)` : ''}\n`,
        );
        if (failed > 0)
          process.stderr.write(
            `${failed} inputs failed on the server and are not in ${sink.files}; run again with --resume to retry them.\n`,
          );
      } catch (error) {
        bar.stop();
        if (error instanceof RemoteError) {
          process.stderr.write(`onnx-gateway: ${error.message}\n`);
          process.exitCode = 1;
          return;
        }
        if (isApiError(error)) fail(error.message);
        exitOnStartupError(error);
      } finally {
        sink.close();
        await started?.engine.close();
        process.off('SIGINT', interrupt);
        process.off('SIGTERM', interrupt);
      }
      if (stop.signal.aborted) process.exit(130);
      if (failed > 0) process.exitCode = 1;
    });
}

/**
 * Embeds the inputs not in `done` with the models loaded here, `slice` at a time, two calls in
 * flight; the inputs embedded.
 */
async function embedInProcess(
  core: CoreContext,
  inputs: AsyncIterable<Input>,
  run: {
    model: string;
    dimensions?: number;
    done: ReadonlySet<string>;
    sink: EmbeddingSink;
    signal: AbortSignal;
    progress(answered: number): void;
  },
): Promise<number> {
  let embedded = 0;
  const inFlight: Promise<{ ids: string[]; vectors: Float32Array; dimensions: number }>[] = [];
  const write = async () => {
    const answered = await inFlight.shift()!;
    run.sink.write(answered.ids, answered.vectors, answered.dimensions);
    embedded += answered.ids.length;
    run.progress(embedded);
  };
  const embedSlice = (batch: Input[]) =>
    embed(core, { model: run.model, input: batch.map((i) => i.text), dimensions: run.dimensions }).then((result) => ({
      ids: batch.map((i) => i.id),
      vectors: result.vectors,
      dimensions: result.dimensions,
    }));
  let pending: Input[] = [];
  for await (const item of inputs) {
    if (run.signal.aborted) break;
    if (run.done.has(item.id)) continue;
    pending.push(item);
    if (pending.length < slice) continue;
    inFlight.push(embedSlice(pending));
    pending = [];
    if (inFlight.length >= 2) await write();
  }
  if (pending.length > 0 && !run.signal.aborted) inFlight.push(embedSlice(pending));
  while (inFlight.length > 0) await write();
  return embedded;
}

function fail(message: string): never {
  process.stderr.write(`onnx-gateway: ${message}\n`);
  process.exit(2);
}
