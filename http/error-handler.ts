// How every failure is answered: a FabricError with its code and status; fastify's own refusals (body too large,
// wrong media type, bad URL) with codes of ours; anything else a 500 API_INTERNAL that names the error and the id
// it was logged under. Every 5xx is logged with its cause.
import { randomUUID } from 'node:crypto';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { FabricError, isFabricError, type ErrorBody } from '../protocol/errors.js';
import { ApiErrorCode } from './errors.js';

export interface HttpFailure {
  status: number;
  body: ErrorBody;
  headers?: Record<string, string>;
}

function fromFastify(err: FastifyError, bodyLimit: number): FabricError | undefined {
  switch (err.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new FabricError(
        ApiErrorCode.bodyTooLarge,
        413,
        `the request body is larger than the limit of ${bodyLimit} bytes`,
        {
          hint: 'send less (large inputs as token ids, not repeated text), or ask the operator to raise NDIF_BODY_LIMIT_BYTES',
          details: { limitBytes: bodyLimit },
        },
      );
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new FabricError(ApiErrorCode.unsupportedMediaType, 415, 'bodies must be application/json', {
        hint: 'send Content-Type: application/json',
      });
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return new FabricError(ApiErrorCode.invalidJson, 400, `the body is not valid JSON: ${err.message}`, {
        hint: 'send a JSON object',
      });
    default:
      if (typeof err.statusCode === 'number' && err.statusCode >= 400 && err.statusCode < 500) {
        return new FabricError(ApiErrorCode.badRequest, err.statusCode, err.message, {
          details: { fastifyCode: err.code ?? null },
        });
      }
      return undefined;
  }
}

/** Errors the router raises before any route runs (fastify's frameworkErrors). */
export function routerFailure(err: FastifyError, log: FastifyRequest['log']): HttpFailure {
  if (err.code === 'FST_ERR_BAD_URL') {
    return {
      status: 400,
      body: {
        code: ApiErrorCode.badUrl,
        message: `the URL cannot be decoded: ${err.message}`,
        hint: 'percent-encode ids in paths with encodeURIComponent',
      },
    };
  }
  if (err.code === 'FST_ERR_MAX_PARAM_LENGTH') {
    return {
      status: 414,
      body: {
        code: ApiErrorCode.urlTooLong,
        message: 'a path parameter is longer than 500 characters',
        hint: 'ids and model keys are at most 128 characters',
      },
    };
  }
  return toHttpFailure(err, log, 0, 'router');
}

/** The answer to a failure; logs 5xx with their cause. */
export function toHttpFailure(err: unknown, log: FastifyRequest['log'], bodyLimit: number, where: string): HttpFailure {
  let fe: FabricError | undefined = isFabricError(err) ? err : undefined;
  if (
    fe === undefined &&
    err instanceof Error &&
    typeof (err as FastifyError).code === 'string' &&
    (err as FastifyError).code.startsWith('FST_')
  ) {
    fe = fromFastify(err as FastifyError, bodyLimit);
  }
  if (fe !== undefined) {
    if (fe.httpStatus >= 500)
      log.error({ err: fe.cause ?? fe, code: fe.code, where }, `${where}: ${fe.code}: ${fe.message}`);
    const headers: Record<string, string> = {};
    // Every refusal for a limit (429) says when to try again.
    if (fe.httpStatus === 429)
      headers['retry-after'] = String(Math.max(1, Math.ceil(Number(fe.details?.retryAfterMs ?? 1000) / 1000)));
    if (fe.code === 'AUTH_KEY_MISSING') headers['www-authenticate'] = 'Bearer';
    return { status: fe.httpStatus, body: fe.toBody(), headers };
  }
  const errorId = randomUUID();
  const name = err instanceof Error ? err.name : typeof err;
  const message = err instanceof Error ? err.message : String(err);
  log.error({ err, errorId, where }, `${where}: internal error ${errorId}: ${name}: ${message}`);
  return {
    status: 500,
    body: {
      code: ApiErrorCode.internal,
      message: `internal error (logged as ${errorId}): ${name}: ${message}`,
      hint: 'this is a bug or a failing dependency; the server log has the stack under this id',
      details: { errorId, error: name },
    },
  };
}

export function installErrorHandling(app: FastifyInstance, bodyLimit: number): void {
  app.setErrorHandler((err: unknown, req: FastifyRequest, reply: FastifyReply) => {
    const f = toHttpFailure(err, req.log, bodyLimit, `${req.method} ${req.routeOptions.url ?? req.url.slice(0, 200)}`);
    if (f.headers !== undefined) reply.headers(f.headers);
    return reply.code(f.status).send(f.body);
  });
  app.setNotFoundHandler((req: FastifyRequest, reply: FastifyReply) => {
    const path = req.url.split('?')[0]!.slice(0, 200);
    return reply.code(404).send({
      code: ApiErrorCode.routeNotFound,
      message: `there is no route ${req.method} ${path}`,
      hint: 'docs/http-api.md lists every route',
    } satisfies ErrorBody);
  });
}
