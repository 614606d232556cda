/**
 * The search service: the task queue, the configured provider and the local index (with Redis,
 * replicated through it), opened together from the configuration and closed together.
 */
import { join } from 'node:path';
import { ConfigError, settings as configSettings, type Config } from '../config.js';
import type { CoreContext } from '../core/context.js';
import { openDatabase } from '../sqlite.js';
import { SearchTasks, type TaskService } from './tasks/local-tasks.js';
import { SharedSearchTasks } from './tasks/shared-tasks.js';
import { SqliteTaskStore } from './tasks/task-store.js';
import { DocumentIndex, type IndexDocument } from './index/document-index.js';
import { invalid } from '../errors.js';
import { ingestImages, type ImageDocument } from './index/images.js';
import { ingestDocuments, type IngestOptions, type IngestReport } from './index/ingest.js';
import type { RankingName } from './index/rankings.js';
import { IndexReplication } from './index/replication.js';
import { LocalRetriever } from './index/retriever.js';
import { LocalIndexWriter, type IndexWriter } from './index/writes.js';
import { LocalSearchProvider } from './providers/local.js';
import { readerRedirects } from './reader/fetch-page.js';
import { SearxngSearchProvider } from './providers/searxng.js';
import type { SearchProvider } from './types.js';

export type SearchSettings = Pick<
  Config,
  | 'dataDir'
  | 'searchProvider'
  | 'searxngUrl'
  | 'searxngTimeout'
  | 'searchConcurrency'
  | 'searchMaxPending'
  | 'searchRetention'
  | 'searchTaskTimeout'
  | 'searchFusion'
  | 'searchRankings'
  | 'searchRerankDepth'
  | 'searchImageModel'
  | 'readerTimeout'
  | 'readerAllowPrivate'
  | 'embeddingImageMaxBytes'
  | 'imageMaxPixels'
  | 'redisUrl'
  | 'searchIndexStreamLength'
>;

export interface SearchLog {
  error(object: unknown, message: string): void;
  info?(object: unknown, message: string): void;
}

/** Where the local index lives under the data dir. */
export function indexPath(dataDir: string): string {
  return join(dataDir, 'search', 'index.sqlite');
}

export function openRetriever(
  ctx: CoreContext,
  settings: Pick<
    SearchSettings,
    'dataDir' | 'searchFusion' | 'searchRankings' | 'searchRerankDepth' | 'searchImageModel'
  >,
): LocalRetriever {
  return new LocalRetriever(ctx, DocumentIndex.open(indexPath(settings.dataDir)), {
    fusion: settings.searchFusion === 'mix' ? 'mix' : 'rrf',
    // The setting's choices are checked when the configuration is read.
    rankings: settings.searchRankings as RankingName[],
    rerankDepth: settings.searchRerankDepth,
    ...(settings.searchImageModel ? { imageModel: settings.searchImageModel } : {}),
  });
}

export class SearchService {
  private constructor(
    private readonly ctx: CoreContext,
    readonly tasks: TaskService,
    readonly retriever: LocalRetriever,
    /** With Redis: the replication every index write goes through. */
    readonly replication: IndexReplication | undefined,
  ) {}

  /** Where index writes go: through the replication stream with Redis, else straight in. */
  get writer(): IndexWriter {
    return this.replication ?? new LocalIndexWriter(this.index);
  }

  static async open(ctx: CoreContext, settings: SearchSettings, log?: SearchLog): Promise<SearchService> {
    // Image vectors are stored under the model's id, whatever name the setting gives it by.
    const imageModel = settings.searchImageModel ? ctx.registry.get(settings.searchImageModel) : undefined;
    if (settings.searchImageModel && !imageModel?.images)
      throw new ConfigError(
        `searchImageModel (${configSettings.searchImageModel.env}) "${settings.searchImageModel}" embeds no images: name an image-text model (CLIP, SigLIP, jina-clip).`,
      );
    const retriever = openRetriever(ctx, { ...settings, searchImageModel: imageModel?.id ?? '' });
    let provider: SearchProvider;
    if (settings.searchProvider === 'searxng') {
      if (!settings.searxngUrl) throw new Error('searchProvider is "searxng" but searxngUrl is not set.');
      provider = new SearxngSearchProvider(ctx, {
        url: settings.searxngUrl,
        timeoutMs: settings.searxngTimeout,
        ...(imageModel
          ? {
              thumbnails: {
                model: imageModel.id,
                fetch: {
                  timeoutMs: settings.readerTimeout,
                  maxRedirects: readerRedirects,
                  allowPrivate: settings.readerAllowPrivate,
                },
                image: { maxBytes: settings.embeddingImageMaxBytes, maxPixels: settings.imageMaxPixels },
              },
            }
          : {}),
      });
    } else {
      provider = new LocalSearchProvider(retriever);
    }
    const options = {
      concurrency: settings.searchConcurrency,
      maxPending: settings.searchMaxPending,
      retentionMs: settings.searchRetention * 1000,
      taskTimeoutMs: settings.searchTaskTimeout,
      log,
    };
    const replication = settings.redisUrl
      ? await IndexReplication.open(settings.redisUrl, retriever.index, {
          streamLength: settings.searchIndexStreamLength,
          log,
        })
      : undefined;
    try {
      const tasks = settings.redisUrl
        ? await SharedSearchTasks.open(settings.redisUrl, provider, options)
        : await SearchTasks.open(
            new SqliteTaskStore(openDatabase(join(settings.dataDir, 'search', 'tasks.sqlite'))),
            provider,
            options,
          );
      return new SearchService(ctx, tasks, retriever, replication);
    } catch (error) {
      await replication?.close();
      throw error;
    }
  }

  get index(): DocumentIndex {
    return this.retriever.index;
  }

  ingest(
    documents: AsyncIterable<IndexDocument> | Iterable<IndexDocument>,
    options?: IngestOptions,
  ): Promise<IngestReport> {
    return ingestDocuments(this.ctx, this.writer, documents, options);
  }

  /** Adds image documents, embedded by the search image model; refused without one. */
  ingestImages(
    images: AsyncIterable<ImageDocument> | Iterable<ImageDocument>,
    options?: Omit<IngestOptions, 'embed'>,
  ): Promise<IngestReport> {
    const model = this.retriever.options.imageModel;
    if (!model)
      throw invalid(
        'documents',
        'Image documents are embedded by the search image model, and none is set (ONNX_GATEWAY_SEARCH_IMAGE_MODEL).',
      );
    return ingestImages(this.ctx, this.writer, model, images, options);
  }

  async close(): Promise<void> {
    await this.tasks.close();
    await this.replication?.close();
    this.index.close();
  }
}
