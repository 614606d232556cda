import type { Config } from '../config.js';
import type { CoreContext } from '../core/context.js';
import type { SearchService } from '../core/search/service.js';
import type { Registry } from '../models/registry.js';
import type { ImagesService } from './images.js';
import type { Metrics } from './metrics.js';

/** What the HTTP layer is given by whoever composes the server. */
export interface HttpServices {
  config: Pick<Config, 'keys' | 'allowedHosts' | 'corsOrigins' | 'bodyLimit' | 'logLevel' | 'logBodies' | 'teiModels' | 'maxBatchTokens' | 'maxBatchSize' | 'queueCapacity' | 'readerAllowPrivate' | 'readerMaxBytes' | 'readerTimeout' | 'readerParseTimeout'>;
  core: CoreContext;
  registry: Registry;
  /** True once every served model is warm in every worker. */
  isReady: () => boolean;
  /** Web search tasks and the local index (absent: the routes are not served). */
  search?: SearchService;
  /** Prometheus metrics (absent: no /metrics route). */
  metrics?: Metrics;
  /** Image edits (absent: the route answers that no image model is served). */
  images?: ImagesService;
}
