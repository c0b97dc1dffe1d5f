// Errors of the HTTP edge shared by the command and query APIs; codes are listed in docs/errors.md
// ("Command API and query API").
import { FabricError } from '../protocol/errors.js';

export const ApiErrorCode = {
  bodyTooLarge: 'API_BODY_TOO_LARGE',
  invalidJson: 'API_INVALID_JSON',
  unsupportedMediaType: 'API_UNSUPPORTED_MEDIA_TYPE',
  invalidBody: 'API_INVALID_BODY',
  invalidParams: 'API_INVALID_PARAMS',
  routeNotFound: 'API_ROUTE_NOT_FOUND',
  badRequest: 'API_BAD_REQUEST',
  badUrl: 'API_BAD_URL',
  urlTooLong: 'API_URL_TOO_LONG',
  protocolMismatch: 'API_PROTOCOL_MISMATCH',
  protocolMalformed: 'API_PROTOCOL_VERSION_MALFORMED',
  rateLimited: 'API_RATE_LIMITED',
  authThrottled: 'API_AUTH_THROTTLED',
  notReady: 'API_NOT_READY',
  internal: 'API_INTERNAL',
  websocketRequired: 'API_WEBSOCKET_REQUIRED',
} as const;

export interface Issue {
  path: string;
  message: string;
}

/** A body, query or path that does not fit its schema: the first issue in the message, up to 10 in details. */
export function invalidInput(where: 'body' | 'query' | 'params', issues: Issue[]): FabricError {
  const first = issues[0] ?? { path: '', message: 'invalid' };
  const code = where === 'body' ? ApiErrorCode.invalidBody : ApiErrorCode.invalidParams;
  const field = first.path === '' ? where : `${where === 'body' ? '' : `${where} `}${first.path}`;
  return new FabricError(code, 400, `${field}: ${first.message}`, {
    hint:
      where === 'body'
        ? 'fix the field named (docs/http-api.md lists every body); unknown fields are refused'
        : 'fix the parameter named',
    details: { issues: issues.slice(0, 10) },
  });
}

/** A model key the catalog does not serve; the message lists the ones it does. */
export function unknownModel(key: string, known: string[]): FabricError {
  const shown = known.slice(0, 20);
  return new FabricError(
    'API_UNKNOWN_MODEL',
    404,
    `there is no model ${JSON.stringify(key.slice(0, 130))}; this fabric serves ${shown.length === 0 ? 'no models' : shown.join(', ')}${known.length > shown.length ? ', …' : ''}`,
    {
      hint: 'use one of the listed keys (GET /models)',
      details: { model: key.slice(0, 130), known },
    },
  );
}
