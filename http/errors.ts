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
  modelDisabled: 'API_MODEL_DISABLED',
  unknownVariant: 'API_UNKNOWN_VARIANT',
} as const;

/** A submission naming a variant `<model>@<edit>` whose edit is not registered (or removed, or another key's private one). */
export function unknownVariant(variant: string, known: string[]): FabricError {
  return new FabricError(
    ApiErrorCode.unknownVariant,
    404,
    `there is no edit ${JSON.stringify(variant.slice(0, 200))} you may use; ${known.length === 0 ? 'the model has none' : `its variants you may use: ${known.slice(0, 20).join(', ')}`} (an edit that was removed is gone for good)`,
    {
      hint: 'submit to the plain model or one of the listed variants (GET /models/<key>/edits, ndif edits ls <model>); register the edit again if it was removed',
      details: { variant: variant.slice(0, 200), known },
    },
  );
}

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

/** A submission or deployment for a model an operator has taken offline; the message gives the operator's reason. */
export function modelDisabled(key: string, note: { reason: string; by: string; at: string }): FabricError {
  return new FabricError(
    ApiErrorCode.modelDisabled,
    409,
    `model ${key} is disabled by ${note.by} since ${note.at}: ${note.reason}`,
    {
      hint: 'try again once an operator enables it (ndif models enable), or use another model (GET /models)',
      details: { model: key, reason: note.reason, disabledBy: note.by, disabledAt: note.at },
    },
  );
}
