// The fastify settings every API instance is created with.
import type { FastifyBaseLogger, FastifyServerOptions } from 'fastify';
import type { Logger } from 'pino';
import type { ApiConfig } from './config.js';

export function fastifyOptions(config: ApiConfig, log: Logger): FastifyServerOptions & { loggerInstance: FastifyBaseLogger } {
  return {
    loggerInstance: log as FastifyBaseLogger,
    bodyLimit: config.bodyLimitBytes,
    // Each call's outcome is logged by the error handler (5xx with their cause); a line per call would cost the
    // submit path more than the rest of it.
    disableRequestLogging: true,
    // Long model keys and ids; fastify's default 100 would answer 414 before our validation names the field.
    routerOptions: { maxParamLength: 500 },
    forceCloseConnections: true,
  };
}
