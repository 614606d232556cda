import type { Batches } from '../batch/batches.js';
import type { Config } from '../config.js';
import type { CoreContext } from '../core/context.js';
import type { SearchService } from '../search/service.js';
import type { Registry } from '../models/registry.js';
import type { ImagesService } from './images.js';
import type { Metrics } from './metrics.js';

/** What the HTTP layer is given by whoever composes the server. */
export interface HttpServices {
  config: Pick<
    Config,
    | 'keys'
    | 'adminKeys'
    | 'indexWriteKeys'
    | 'indexMaxDocumentChars'
    | 'indexMaxDocuments'
    | 'allowedHosts'
    | 'corsOrigins'
    | 'bodyLimit'
    | 'maxInputs'
    | 'embeddingImageMaxBytes'
    | 'imageMaxPixels'
    | 'imageUrls'
    | 'logLevel'
    | 'logBodies'
    | 'teiModels'
    | 'maxBatchTokens'
    | 'maxBatchSize'
    | 'queueCapacity'
    | 'maxResponseMb'
    | 'requestTimeout'
    | 'readerAllowPrivate'
    | 'readerMaxBytes'
    | 'readerTimeout'
    | 'readerParseTimeout'
    // Pulls over HTTP: what may be pulled, from where, into where.
    | 'pullAllow'
    | 'modelsDir'
    | 'manifestsDir'
    | 'hfEndpoint'
    | 'onnxVariant'
    // Uploads to the files API.
    | 'fileMaxMb'
  >;
  core: CoreContext;
  registry: Registry;
  /** True once every served model is warm in every worker. */
  isReady: () => boolean;
  /** Web search tasks and the local index (absent: the routes are not served). */
  search?: SearchService;
  /** The files API and batches (absent: the routes are not served). */
  batch?: Batches;
  /** Prometheus metrics (absent: no /metrics route). */
  metrics?: Metrics;
  /** Image edits (absent: the route answers that no image model is served). */
  images?: ImagesService;
  /**
   * Called after a pull over HTTP has installed a model's files, with the id to serve it by
   * (`owner/name`, a catalogue id, `:variant` when one was named); the pull reports success once it
   * resolves, and its error when it throws. Absent: the files are installed and served from the
   * next start.
   */
  onModelPulled?: (id: string) => Promise<void>;
}
