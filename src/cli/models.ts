/**
 * The `models` subcommands: list (the catalogue against the models dir), pull (download from the
 * Hugging Face Hub), quantize (write the int8 variant).
 */
import type { Command } from 'commander';
import { loadConfig, settings, type Config } from '../config.js';
import { formatQuantizeReport } from '../quantize/report.js';
import { loadCatalogue, type Catalogue } from '../models/catalogue.js';
import { describeTarget, formatPullReport, parsePullSpec, pullModel, PullSpecError } from '../models/download.js';
import { Hub, hubOptions } from '../models/hub.js';
import { planInt8, quantizeToInt8 } from '../quantize/int8-variant.js';
import { formatBytes, progressFor } from '../models/download-progress.js';
import { ImageCatalogue } from '../models/image-catalogue.js';
import { pullImagePipeline } from '../models/image-download.js';
import { parseVariant } from '../models/variants.js';
import { exitOnStartupError } from './exit.js';
import { formatModelTable, listLocalModels } from './models-list.js';

interface ModelsOptions {
  modelsDir?: string;
  manifestsDir?: string;
  hfEndpoint?: string;
  variant?: string;
  imageModelsDir?: string;
}

const withDirs = (command: Command) =>
  command
    .option('--models-dir <dir>', `${settings.modelsDir.description} (env ${settings.modelsDir.env})`)
    .option('--manifests-dir <dir>', `${settings.manifestsDir.description} (env ${settings.manifestsDir.env})`)
    .option('--image-models-dir <dir>', `${settings.imageModelsDir.description} (env ${settings.imageModelsDir.env})`);

export function registerModelsCommand(program: Command): void {
  const models = program.command('models').description('list, download and quantize models');

  withDirs(models.command('list'))
    .description('the catalogue and the models dir: task, source, present or missing, variants, size on disk')
    .option('--json', 'one JSON array instead of a table')
    .action((options: ModelsOptions & { json?: boolean }) => {
      const { config, catalogue } = setUp(options);
      const list = listLocalModels(catalogue, config.modelsDir);
      process.stdout.write(options.json ? `${JSON.stringify(list, null, 2)}\n` : `${formatModelTable(list)}\n`);
    });

  withDirs(models.command('pull'))
    .description(
      'download models from the Hugging Face Hub by repository or catalogue id (resumable, verified, locked to a commit)',
    )
    .argument(
      '<ids...>',
      'Hub repository ids (owner/name) or catalogue ids (see "models list"), each optionally @<revision> and :<variant>; or image pipeline ids (models/images/, fetched from their manifest\'s URL into the image models dir)',
    )
    .option('--variant <name>', `${settings.onnxVariant.description} (env ${settings.onnxVariant.env})`)
    .option('--update', "move to the catalogue's pinned revision, else main, instead of the commit in the lock file")
    .option('--hf-endpoint <url>', `${settings.hfEndpoint.description} (env ${settings.hfEndpoint.env} or HF_ENDPOINT)`)
    .option('--force', 'download every file again, even those on disk that match the Hub')
    .action(async (ids: string[], options: ModelsOptions & { variant?: string; update?: boolean; force?: boolean }) => {
      const { config, catalogue } = setUp(options);
      const images = ImageCatalogue.load();
      const requests = ids
        .filter((spec) => !images.get(spec))
        .map((spec) => {
          try {
            return parsePullSpec(spec, catalogue, config.modelsDir);
          } catch (error) {
            if (error instanceof PullSpecError) fail(error.message);
            throw error;
          }
        });
      const hub = new Hub(hubOptions(config.hfEndpoint));
      const progress = progressFor(process.stderr);
      // Ctrl-C stops the transfer cleanly: the partial file stays and the next pull resumes it.
      const abort = new AbortController();
      process.once('SIGINT', () => abort.abort());
      for (const manifest of ids.flatMap((spec) => images.get(spec) ?? [])) {
        process.stderr.write(
          `${manifest.id} (image pipeline) from ${manifest.source.url} into ${config.imageModelsDir}\n`,
        );
        try {
          const report = await pullImagePipeline(manifest, {
            imageModelsDir: config.imageModelsDir,
            progress,
            force: options.force,
            signal: abort.signal,
          });
          const { file } = report;
          process.stdout.write(
            `${manifest.id}: ${file.status === 'present' ? 'present' : `downloaded (${formatBytes(file.bytes)})`}, verified by ${file.verifiedBy}, in ${report.dir}\n`,
          );
        } catch (error) {
          if (abort.signal.aborted) fail('interrupted; run the same pull again to resume.', 130);
          exitOnStartupError(error);
        }
      }
      for (const { target, variant } of requests) {
        process.stderr.write(`${describeTarget(target)} from ${hub.options.endpoint} into ${target.dir}\n`);
        try {
          const variants = [variant ?? parseVariant(config.onnxVariant)];
          const log = (line: string) => process.stderr.write(`${line}\n`);
          const report = await pullModel(target, {
            modelsDir: config.modelsDir,
            hub,
            progress,
            variants,
            update: options.update,
            force: options.force,
            log,
            signal: abort.signal,
          });
          process.stdout.write(`${formatPullReport(report)}\n`);
        } catch (error) {
          if (abort.signal.aborted) {
            // On a terminal the ^C echo ends no line.
            if (process.stderr.isTTY) process.stderr.write('\n');
            fail('interrupted; run the same pull again to resume.', 130);
          }
          exitOnStartupError(error);
        }
      }
    });

  withDirs(models.command('quantize'))
    .description('write the int8 variant (onnx/model_int8.onnx) of a model, served as "<id>:int8"')
    .argument('<target>', 'a model id in the models dir, a model folder, or an .onnx file')
    .option(
      '--calibration <file>',
      'text file (one text per line) to calibrate GPTQ rounding on, instead of the shipped English sample',
    )
    .option('--no-calibration', 'round every weight to nearest, without running the model (faster, less accurate)')
    .action(async (target: string, options: ModelsOptions & { calibration?: string | false }) => {
      const { config, catalogue } = setUp(options);
      try {
        const plan = planInt8(target, config.modelsDir, catalogue);
        process.stderr.write(`quantizing ${plan.input}\n`);
        const started = performance.now();
        const report = await quantizeToInt8(plan, {
          calibration: options.calibration,
          log: (line) => process.stderr.write(`${line}\n`),
        });
        process.stderr.write(`done in ${((performance.now() - started) / 1000).toFixed(1)} s\n`);
        process.stdout.write(`${formatQuantizeReport(report)}\nwrote ${plan.output}\n`);
        if (plan.id) process.stdout.write(`serve it as "${plan.id}:int8" (ONNX_GATEWAY_MODELS=${plan.id}:int8)\n`);
      } catch (error) {
        exitOnStartupError(error);
      }
    });
}

function setUp(options: ModelsOptions): { config: Config; catalogue: Catalogue } {
  try {
    const config = loadConfig({
      modelsDir: options.modelsDir,
      manifestsDir: options.manifestsDir,
      imageModelsDir: options.imageModelsDir,
      hfEndpoint: options.hfEndpoint,
      onnxVariant: options.variant,
      logLevel: 'silent',
    });
    return { config, catalogue: loadCatalogue(config.manifestsDir) };
  } catch (error) {
    exitOnStartupError(error);
  }
}

function fail(message: string, code = 2): never {
  process.stderr.write(`onnx-gateway: ${message}\n`);
  process.exit(code);
}
