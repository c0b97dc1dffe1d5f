// GET /models/:key/tokenizer: the model's tokenizer for clients that encode and decode locally (the SDK's
// `ndif.tokenizer(model)`). The ETag is the bundle's sha256; a client that sends it in If-None-Match gets 304.
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { RouteDeps } from '../../http/deps.js';
import { unknownModel } from '../../http/errors.js';
import { parseInput } from '../../http/validate.js';
import { MODEL_KEY } from '../../domain/shared/ids.js';
import { tokenizerEtag } from '../../protocol/tokenizer-bundle.js';
import { TokenizerBundles } from '../tokenizer/bundle.js';

const keyParams = z.strictObject({
  key: z.string().regex(MODEL_KEY, 'a model key: 1–128 of letters, digits and . _ / -'),
});

export function tokenizerRoutes(app: FastifyInstance, deps: RouteDeps): void {
  const { ctx } = deps;
  deps.capabilities.add('model-tokenizer');
  // A model's reply is made on its first request, once however many arrive together, and kept. Made for every
  // registered model when the API started, it cost ~120 ms of CPU and the tokenizer's bytes in memory per model at
  // every start, for models whose tokenizer no client may ever fetch.
  const bundles = new TokenizerBundles();
  app.get('/models/:key/tokenizer', async (req, reply) => {
    const { key } = parseInput(keyParams, req.params, 'params');
    const entry = ctx.catalog.get(key);
    if (entry === undefined)
      throw unknownModel(
        key,
        ctx.catalog.list().map((e) => e.key),
      );
    const { sha256, body } = await bundles.get(entry);
    const etag = tokenizerEtag(sha256);
    reply.header('etag', etag).header('cache-control', 'no-cache');
    const given = req.headers['if-none-match'];
    if (given?.split(',').some((t) => t.trim() === etag)) return reply.code(304).send();
    return reply.header('content-type', 'application/json; charset=utf-8').send(body);
  });
}
