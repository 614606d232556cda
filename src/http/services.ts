import type { Config } from '../config.js';
import type { CoreContext } from '../core/context.js';
import type { Registry } from '../models/registry.js';

/** What the HTTP layer is given by whoever composes the server. */
export interface HttpServices {
  config: Pick<Config, 'keys' | 'bodyLimit' | 'logLevel'>;
  core: CoreContext;
  registry: Registry;
  /** True once every served model is warm in every worker. */
  isReady: () => boolean;
}
