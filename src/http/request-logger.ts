/**
 * The logger of each request: pino's child with the request id, made when the request first logs
 * at a level the server writes. fastify makes that child for every request, and at level warn a
 * request that goes well logs nothing, so the child was work thrown away on every request.
 */
import type { FastifyBaseLogger } from 'fastify';
import type { Bindings, ChildLoggerOptions, Logger } from 'pino';

const levels = ['fatal', 'error', 'warn', 'info', 'debug', 'trace'] as const;
type Level = (typeof levels)[number];

class RequestLogger implements FastifyBaseLogger {
  // The level methods, put on the prototype below.
  declare fatal: (...args: unknown[]) => void;
  declare error: (...args: unknown[]) => void;
  declare warn: (...args: unknown[]) => void;
  declare info: (...args: unknown[]) => void;
  declare debug: (...args: unknown[]) => void;
  declare trace: (...args: unknown[]) => void;
  private made: FastifyBaseLogger | undefined;

  constructor(
    private readonly parent: Logger,
    private readonly bindings: Bindings,
    private readonly options: ChildLoggerOptions,
  ) {}

  private get logger(): FastifyBaseLogger {
    return (this.made ??= this.parent.child(this.bindings, this.options));
  }

  /** What every level method does (they are set on the prototype below). */
  write(level: Level, args: unknown[]): void {
    if (!this.made && !this.parent.isLevelEnabled(level)) return;
    const logger = this.logger;
    const log: (...rest: unknown[]) => void = logger[level];
    log.apply(logger, args);
  }

  silent(): void {}

  get level(): string {
    return this.made?.level ?? this.parent.level;
  }

  set level(level: string) {
    this.logger.level = level;
  }

  child(bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    return this.logger.child(bindings, options);
  }
}

for (const level of levels) {
  RequestLogger.prototype[level] = function (this: RequestLogger, ...args: unknown[]) {
    this.write(level, args);
  };
}

/** fastify's `childLoggerFactory`; a route with a level of its own gets its child at once. */
export const requestLoggerFactory = (
  logger: FastifyBaseLogger,
  bindings: Bindings,
  options: ChildLoggerOptions,
): FastifyBaseLogger =>
  options.level === undefined
    ? new RequestLogger(logger as Logger, bindings, options)
    : logger.child(bindings, options);
