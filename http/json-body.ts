// The JSON body parser: an empty body is no body (POST /requests/:id/cancel with Content-Type set), `__proto__`
// keys are refused, anything else that is not JSON is API_INVALID_JSON.
import type { FastifyInstance } from 'fastify';
import { FabricError } from '../protocol/errors.js';
import { ApiErrorCode } from './errors.js';

function refuseProto(key: string, value: unknown): unknown {
  if (key === '__proto__') throw new SyntaxError('a "__proto__" key is not allowed');
  return value;
}

export function installJsonBody(app: FastifyInstance): void {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_req, body, done) => {
    const text = body as string;
    if (text.trim() === '') return done(null, undefined);
    try {
      done(null, text.includes('__proto__') ? JSON.parse(text, refuseProto) : JSON.parse(text));
    } catch (e) {
      done(
        new FabricError(ApiErrorCode.invalidJson, 400, `the body is not valid JSON: ${(e as Error).message}`, {
          hint: 'send one JSON object with Content-Type: application/json',
        }),
        undefined,
      );
    }
  });
}
