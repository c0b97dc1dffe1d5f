// A key's uploaded tensors, read from its `tensors-<actor>` stream: the live ones (expired ones are recorded as
// TensorDeleted { reason: EXPIRED } and their blobs deleted when met, as results' retention does), the bytes they
// count against the key's storage quota, and appending TensorUploaded / TensorDeleted under the revision read.
import { randomUUID } from 'node:crypto';
import type { FabricContext } from '../../../fabric/context.js';
import type { Identity } from '../../../auth/keys.js';
import type { JsonValue } from '../../../eventstore/port.js';
import { nowIso } from '../../../http/deps.js';
import {
  foldTensors,
  liveTensors,
  type TensorEvent,
  type TensorRecord,
  tensorStream,
} from '../../../domain/tensors/tensors.js';

export interface KeyTensors {
  live: Map<string, TensorRecord>;
  /** The stream's revision as read (-1: no stream). */
  revision: number;
}

/** At most this many events of a key's tensor stream are read (uploads and deletes together). */
export const TENSOR_STREAM_MAX_EVENTS = 100_000;

export async function appendTensorEvents(
  ctx: FabricContext,
  me: Identity,
  events: TensorEvent[],
  revision: number,
): Promise<void> {
  if (events.length === 0) return;
  const correlationId = randomUUID();
  await ctx.store.append(
    tensorStream(me.actor),
    events.map((e) => ({
      id: randomUUID(),
      type: e.type,
      version: 1,
      data: e.data as unknown as JsonValue,
      metadata: { correlationId, causationId: correlationId, actor: me.actor, at: nowIso(ctx) },
    })),
    { expectedRevision: revision < 0 ? 'no_stream' : revision },
  );
}

/** Reads the caller's tensors; expired ones are recorded as deleted and their blobs removed (best effort). */
export async function readKeyTensors(ctx: FabricContext, me: Identity): Promise<KeyTensors> {
  const events = await ctx.store.readStream(tensorStream(me.actor), { limit: TENSOR_STREAM_MAX_EVENTS });
  let revision = events.length === 0 ? -1 : events[events.length - 1]!.revision;
  const { live, expired } = liveTensors(foldTensors(events), ctx.clock());
  if (expired.length > 0) {
    try {
      await appendTensorEvents(
        ctx,
        me,
        expired.map((t) => ({ type: 'TensorDeleted', data: { name: t.name, blobRef: t.blobRef, reason: 'EXPIRED' } })),
        revision,
      );
      revision += expired.length;
      for (const t of expired) await ctx.blobs.delete(t.blobRef).catch(() => false);
    } catch {
      // Another call recorded them first (or will): the tensors are gone either way.
    }
  }
  return { live: new Map(live.map((t) => [t.name, t])), revision };
}

export function tensorBytesOf(k: KeyTensors): number {
  let n = 0;
  for (const t of k.live.values()) n += t.bytes;
  return n;
}

/** What the API shows of a tensor (never the blob reference). */
export function tensorView(t: TensorRecord): Record<string, unknown> {
  return {
    name: t.name,
    dtype: t.dtype,
    shape: t.shape,
    bytes: t.bytes,
    sha256: t.sha256,
    uploadedAt: t.uploadedAt,
    expiresAt: t.expiresAt,
  };
}
