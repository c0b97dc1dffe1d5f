// Uploaded tensors: PUT /tensors/:name (the raw little-endian bytes, x-ndif-dtype and x-ndif-shape headers, streamed
// to the blob store without being held here), GET /tensors (the caller's own), DELETE /tensors/:name. Each key
// sees only its own: another key's tensor answers as an unknown name. Requests name them (`tensors: [...]`).
import type { FastifyInstance } from 'fastify';
import type { Readable } from 'node:stream';
import { callerOf } from '../../../http/access.js';
import type { RouteDeps } from '../../../http/deps.js';
import { nowIso } from '../../../http/deps.js';
import { limitsOf } from '../../../http/key-limits.js';
import { putStream } from '../../../blobstore/stream-put.js';
import { BlobErrorCode } from '../../../blobstore/errors.js';
import { FabricError } from '../../../protocol/errors.js';
import { storedBytesOf } from '../../../projections/requests/state.js';
import { checkTensorHeaders, type TensorRecord } from '../../../domain/tensors/tensors.js';
import { isWrongExpectedRevision } from '../../../eventstore/errors.js';
import { appendTensorEvents, readKeyTensors, tensorBytesOf, tensorView } from '../tensors/key-tensors.js';
import { tensorInvalid, tensorQuota, tensorTooLarge, unknownTensor } from '../tensors/errors.js';

/** Tensors one key may keep at once. */
export const MAX_TENSORS_PER_KEY = 256;

const header = (v: string | string[] | undefined): string | undefined => (Array.isArray(v) ? v[0] : v);

export function tensorRoutes(app: FastifyInstance, deps: RouteDeps): void {
  const { ctx, config } = deps;
  void app.register(async (scope) => {
    // The body is handed over as the raw stream: the route checks its declared size and streams it to the blob store.
    scope.addContentTypeParser('application/octet-stream', (_req, payload, done) => done(null, payload));

    scope.put('/tensors/:name', async (req, reply) => {
      const me = callerOf(req);
      const name = (req.params as { name: string }).name;
      const body = req.body as Readable | undefined;
      const raw = typeof body?.resume === 'function' ? body : undefined;
      const drain = () => raw?.resume();
      const checked = checkTensorHeaders(
        name,
        header(req.headers['x-ndif-dtype']),
        header(req.headers['x-ndif-shape']),
      );
      if ('problem' in checked) {
        drain();
        throw tensorInvalid(checked.problem, checked.hint);
      }
      const length = Number(req.headers['content-length'] ?? NaN);
      if (raw === undefined || !Number.isSafeInteger(length)) {
        drain();
        throw tensorInvalid(
          'an upload needs Content-Type: application/octet-stream and a Content-Length',
          'send the raw bytes with their length (not chunked)',
        );
      }
      if (checked.bytes > config.tensorMaxBytes) {
        drain();
        throw tensorTooLarge(checked.bytes, config.tensorMaxBytes);
      }
      if (length !== checked.bytes) {
        drain();
        throw tensorInvalid(
          `the body is ${length} bytes; a ${checked.dtype} tensor of shape [${checked.shape.join(', ')}] is ${checked.bytes} bytes`,
          "send exactly the tensor's bytes, little-endian, row-major, and its dtype and shape in the headers",
          { contentLength: length, expectedBytes: checked.bytes },
        );
      }
      const quota = limitsOf(me, config).storageQuotaBytes;
      const admit = async () => {
        const kept = await readKeyTensors(ctx, me);
        const replaced = kept.live.get(name);
        if (replaced === undefined && kept.live.size >= MAX_TENSORS_PER_KEY)
          throw tensorInvalid(
            `this key keeps ${kept.live.size} tensors, the most one key may keep`,
            'delete tensors you no longer need (DELETE /tensors/:name)',
          );
        if (quota !== null) {
          const stored =
            storedBytesOf(ctx.view.state.requests, me.actor) + tensorBytesOf(kept) - (replaced?.bytes ?? 0);
          if (stored + checked.bytes > quota) throw tensorQuota(me.actor, stored, checked.bytes, quota);
        }
        return { kept, replaced };
      };
      try {
        await admit();
      } catch (e) {
        drain();
        throw e;
      }
      let blob: Awaited<ReturnType<typeof putStream>>;
      try {
        blob = await putStream(ctx.blobs, raw, checked.bytes);
      } catch (e) {
        drain();
        if (e instanceof FabricError && e.code === BlobErrorCode.SizeMismatch)
          throw tensorInvalid(e.message, 'send exactly Content-Length bytes');
        throw e;
      }
      const at = nowIso(ctx);
      const record: TensorRecord = {
        name,
        dtype: checked.dtype,
        shape: checked.shape,
        bytes: checked.bytes,
        blobRef: blob.ref,
        sha256: blob.sha256,
        uploadedAt: at,
        expiresAt:
          config.tensorRetentionMs === null ? null : new Date(ctx.clock() + config.tensorRetentionMs).toISOString(),
      };
      // Recorded under the revision the quota was checked at; a concurrent upload or delete of this key: checked again.
      for (let attempt = 0; ; attempt++) {
        try {
          const { kept, replaced } = await admit();
          await appendTensorEvents(
            ctx,
            me,
            [
              ...(replaced === undefined
                ? []
                : [
                    {
                      type: 'TensorDeleted' as const,
                      data: { name, blobRef: replaced.blobRef, reason: 'REPLACED' as const },
                    },
                  ]),
              { type: 'TensorUploaded', data: record },
            ],
            kept.revision,
          );
          if (replaced !== undefined) await ctx.blobs.delete(replaced.blobRef).catch(() => false);
          break;
        } catch (e) {
          if (isWrongExpectedRevision(e) && attempt < 5) continue;
          await ctx.blobs.delete(blob.ref).catch(() => false);
          throw e;
        }
      }
      req.log.info({ tensor: name, bytes: record.bytes, by: me.actor }, `tensor ${name} uploaded by ${me.actor}`);
      return reply.code(201).send(tensorView(record));
    });
  });

  app.get('/tensors', async (req) => {
    const me = callerOf(req);
    const kept = await readKeyTensors(ctx, me);
    const tensors = [...kept.live.values()].map(tensorView);
    return { tensors, bytes: tensorBytesOf(kept) };
  });

  app.delete('/tensors/:name', async (req) => {
    const me = callerOf(req);
    const name = (req.params as { name: string }).name;
    for (let attempt = 0; ; attempt++) {
      const kept = await readKeyTensors(ctx, me);
      const t = kept.live.get(name);
      if (t === undefined) throw unknownTensor(name, [...kept.live.keys()]);
      try {
        await appendTensorEvents(
          ctx,
          me,
          [{ type: 'TensorDeleted', data: { name, blobRef: t.blobRef, reason: 'DELETED' } }],
          kept.revision,
        );
      } catch (e) {
        if (isWrongExpectedRevision(e) && attempt < 5) continue;
        throw e;
      }
      await ctx.blobs.delete(t.blobRef).catch(() => false);
      return { name, deleted: true };
    }
  });
}
