/**
 * The `index` subcommands: the local search index, filled here or through
 * POST /v1/web-search/index/documents. With redisUrl set, `add` writes through the replication
 * stream like a server does, so every replica gets the documents.
 */
import type { Command } from 'commander';
import { loadConfig, settings } from '../config.js';
import type { CoreContext } from '../core/context.js';
import { DocumentIndex } from '../search/index/document-index.js';
import { embedMissing, ingestDocuments } from '../search/index/ingest.js';
import { IndexReplication } from '../search/index/replication.js';
import { LocalIndexWriter, type IndexWriter } from '../search/index/writes.js';
import { ingestImages, readImageFiles } from '../search/index/images.js';
import { readSources } from '../search/index/sources.js';
import { indexPath } from '../search/service.js';
import { isApiError } from '../errors.js';
import { startCore } from '../main.js';
import { exitOnStartupError } from './exit.js';

interface IndexOptions {
  dataDir?: string;
  modelsDir?: string;
  models?: string;
  workers?: string;
  redisUrl?: string;
  searchImageModel?: string;
}

const indexOptions = (command: Command) =>
  command
    .option('--data-dir <dir>', `${settings.dataDir.description} (env ${settings.dataDir.env})`)
    .option('--models-dir <dir>', `${settings.modelsDir.description} (env ${settings.modelsDir.env})`)
    .option('--models <ids>', `${settings.models.description} (env ${settings.models.env})`)
    .option('--workers <n>', `${settings.workers.description} (env ${settings.workers.env})`)
    .option('--redis-url <url>', `${settings.redisUrl.description} (env ${settings.redisUrl.env})`)
    .option(
      '--search-image-model <id>',
      `${settings.searchImageModel.description} (env ${settings.searchImageModel.env})`,
    );

export function registerIndexCommand(program: Command): void {
  const indexCommand = program.command('index').description('manage the local search index (in the data dir)');

  indexOptions(
    indexCommand
      .command('add')
      .argument('<paths...>', 'folders of .md/.txt/.html files, or .jsonl / .jsonl.gz files (with --images: images)'),
  )
    .description(
      'add documents (embedded by the served embedder; a document with a known id or path replaces the old one)',
    )
    .option('--no-embed', 'index for BM25 only, without vectors')
    .option(
      '--images',
      'the paths are .png / .jpg / .webp images or folders of them, embedded by the search image model (--search-image-model)',
    )
    .action(async (paths: string[], options: IndexOptions & { embed: boolean; images?: boolean }) => {
      const config = loadIndexConfig(options);
      if (options.images) return addImages(paths, config);
      // Without vectors no model is needed, so none is loaded.
      await withIndexWriter(config, options.embed, async (writer, index, core) => {
        const since = performance.now();
        const report = await ingestDocuments(core, writer, readSources(paths), {
          embed: options.embed,
          onProgress: (progress) => process.stderr.write(`\rindexed ${progress.added + progress.updated} documents`),
        });
        // Documents indexed earlier without vectors, or under another embedder, get them now.
        const backfilled = core ? await embedMissing(core, index, writer) : 0;
        const seconds = ((performance.now() - since) / 1000).toFixed(1);
        process.stderr.write(
          `\radded ${report.added}, replaced ${report.updated}, embedded ${report.embedded + backfilled} in ${seconds} s\n`,
        );
      });
    });

  indexOptions(indexCommand.command('stats'))
    .description('print the number of documents and vectors in the index')
    .action((options: IndexOptions) => {
      const index = DocumentIndex.open(indexPath(loadIndexConfig(options).dataDir));
      process.stdout.write(`${JSON.stringify(index.stats())}\n`);
      index.close();
    });
}

/** `index add --images`: each image embedded by the search image model and written as an image document. */
async function addImages(paths: string[], config: IndexConfig): Promise<void> {
  const model = config.searchImageModel;
  if (!model)
    fail(
      `index add --images embeds with the search image model: set --search-image-model or ${settings.searchImageModel.env}.`,
    );
  await withIndexWriter(config, true, async (writer, _index, core) => {
    const since = performance.now();
    const report = await ingestImages(core!, writer, model, readImageFiles(paths), {
      onProgress: (progress) => process.stderr.write(`\rindexed ${progress.added + progress.updated} images`),
    });
    const seconds = ((performance.now() - since) / 1000).toFixed(1);
    process.stderr.write(`\radded ${report.added}, replaced ${report.updated} images in ${seconds} s\n`);
  });
}

type IndexConfig = ReturnType<typeof loadIndexConfig>;

/**
 * Opens the index and its writer (through the replication stream with redisUrl), and the models
 * when `withModels`; runs `write`, prints the index's stats, and closes everything, ending the
 * command on an error.
 */
async function withIndexWriter(
  config: IndexConfig,
  withModels: boolean,
  write: (writer: IndexWriter, index: DocumentIndex, core: CoreContext | undefined) => Promise<void>,
): Promise<void> {
  const index = DocumentIndex.open(indexPath(config.dataDir));
  let started: Awaited<ReturnType<typeof startCore>> | undefined;
  let replication: IndexReplication | undefined;
  try {
    if (config.redisUrl)
      replication = await IndexReplication.open(config.redisUrl, index, {
        streamLength: config.searchIndexStreamLength,
      });
    const writer: IndexWriter = replication ?? new LocalIndexWriter(index);
    if (withModels) {
      started = await startCore(config);
      await started.ready;
    }
    await write(writer, index, started?.core);
    process.stdout.write(`${JSON.stringify(index.stats())}\n`);
  } catch (error) {
    if (isApiError(error)) fail(error.message);
    exitOnStartupError(error);
  } finally {
    await replication?.close();
    index.close();
    await started?.engine.close();
  }
}

function loadIndexConfig(options: IndexOptions) {
  try {
    return loadConfig({
      dataDir: options.dataDir,
      modelsDir: options.modelsDir,
      models: options.models,
      workers: options.workers,
      redisUrl: options.redisUrl,
      searchImageModel: options.searchImageModel,
      logLevel: 'silent',
    });
  } catch (error) {
    exitOnStartupError(error);
  }
}

function fail(message: string): never {
  process.stderr.write(`onnx-gateway: ${message}\n`);
  process.exit(2);
}
