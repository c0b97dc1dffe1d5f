// The fastify settings every API instance is created with.
import { LogController, type FastifyBaseLogger, type FastifyServerOptions } from 'fastify';
import type { Logger } from 'pino';
import type { ApiConfig } from './config.js';
import { routerFailure } from './error-handler.js';

export function fastifyOptions(
  config: ApiConfig,
  log: Logger,
): FastifyServerOptions & { loggerInstance: FastifyBaseLogger } {
  return {
    loggerInstance: log as FastifyBaseLogger,
    bodyLimit: config.bodyLimitBytes,
    // Each call's outcome is logged by the error handler (5xx with their cause); a line per call would cost the
    // submit path more than the rest of it.
    logController: new LogController({ disableRequestLogging: true }),
    // Long model keys and ids; fastify's default 100 would answer 414 before our validation names the field.
    routerOptions: { maxParamLength: 500 },
    // A URL the router cannot decode (bad percent-encoding, a parameter too long) gets a code of ours too.
    frameworkErrors: (err, req, reply) => {
      const f = routerFailure(err, req.log);
      void (reply as unknown as { code(n: number): { send(b: unknown): unknown } }).code(f.status).send(f.body);
    },
    forceCloseConnections: true,
  };
}
