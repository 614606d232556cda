/**
 * The `index` subcommands: the local search index, filled here or through
 * POST /v1/web-search/index/documents. With redisUrl set, `add` writes through the replication
 * stream like a server does, so every replica gets the documents.
 */
import type { Command } from 'commander';
import { loadConfig, settings } from '../config.js';
import { DocumentIndex } from '../search/index/document-index.js';
import { embedMissing, ingestDocuments } from '../search/index/ingest.js';
import { IndexReplication } from '../search/index/replication.js';
import { LocalIndexWriter, type IndexWriter } from '../search/index/writes.js';
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
}

const indexOptions = (command: Command) =>
  command
    .option('--data-dir <dir>', `${settings.dataDir.description} (env ${settings.dataDir.env})`)
    .option('--models-dir <dir>', `${settings.modelsDir.description} (env ${settings.modelsDir.env})`)
    .option('--models <ids>', `${settings.models.description} (env ${settings.models.env})`)
    .option('--workers <n>', `${settings.workers.description} (env ${settings.workers.env})`)
    .option('--redis-url <url>', `${settings.redisUrl.description} (env ${settings.redisUrl.env})`);

export function registerIndexCommand(program: Command): void {
  const indexCommand = program.command('index').description('manage the local search index (in the data dir)');

  indexOptions(
    indexCommand.command('add').argument('<paths...>', 'folders of .md/.txt/.html files, or .jsonl / .jsonl.gz files'),
  )
    .description(
      'add documents (embedded by the served embedder; a document with a known id or path replaces the old one)',
    )
    .option('--no-embed', 'index for BM25 only, without vectors')
    .action(async (paths: string[], options: IndexOptions & { embed: boolean }) => {
      const config = loadIndexConfig(options);
      const index = DocumentIndex.open(indexPath(config.dataDir));
      // Without vectors no model is needed, so none is loaded.
      let started: Awaited<ReturnType<typeof startCore>> | undefined;
      let replication: IndexReplication | undefined;
      try {
        if (config.redisUrl)
          replication = await IndexReplication.open(config.redisUrl, index, {
            streamLength: config.searchIndexStreamLength,
          });
        const writer: IndexWriter = replication ?? new LocalIndexWriter(index);
        if (options.embed) {
          started = await startCore(config);
          await started.ready;
        }
        const since = performance.now();
        const report = await ingestDocuments(started?.core, writer, readSources(paths), {
          embed: options.embed,
          onProgress: (progress) => process.stderr.write(`\rindexed ${progress.added + progress.updated} documents`),
        });
        // Documents indexed earlier without vectors, or under another embedder, get them now.
        const backfilled = started ? await embedMissing(started.core, index, writer) : 0;
        const seconds = ((performance.now() - since) / 1000).toFixed(1);
        process.stderr.write(
          `\radded ${report.added}, replaced ${report.updated}, embedded ${report.embedded + backfilled} in ${seconds} s\n`,
        );
        process.stdout.write(`${JSON.stringify(index.stats())}\n`);
      } catch (error) {
        if (isApiError(error)) fail(error.message);
        exitOnStartupError(error);
      } finally {
        await replication?.close();
        index.close();
        await started?.engine.close();
      }
    });

  indexOptions(indexCommand.command('stats'))
    .description('print the number of documents and vectors in the index')
    .action((options: IndexOptions) => {
      const index = DocumentIndex.open(indexPath(loadIndexConfig(options).dataDir));
      process.stdout.write(`${JSON.stringify(index.stats())}\n`);
      index.close();
    });
}

function loadIndexConfig(options: IndexOptions) {
  try {
    return loadConfig({
      dataDir: options.dataDir,
      modelsDir: options.modelsDir,
      models: options.models,
      workers: options.workers,
      redisUrl: options.redisUrl,
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
