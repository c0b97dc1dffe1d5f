// Command metadata of an HTTP call: the caller as actor (API key id, never the secret), the context's clock, and
// a command id that is the client's Idempotency-Key when it sends one (the same key, the same command).
import type { FastifyRequest } from 'fastify';
import type { CommandMetadata } from '../handlers/codec.js';
import type { FabricContext } from '../../fabric/context.js';
import { FabricError } from '../../protocol/errors.js';
import { ApiErrorCode } from '../../http/errors.js';
import { nowIso } from '../../http/deps.js';
import type { Identity } from '../../auth/keys.js';

const IDEMPOTENCY_KEY = /^[A-Za-z0-9._:-]{1,128}$/;

/** The command id of an operator call: `op:<actor>:<Idempotency-Key>`, or a fresh `http:<id>`. */
export function commandIdOf(req: FastifyRequest, me: Identity, ctx: FabricContext): string {
  const raw = req.headers['idempotency-key'];
  if (raw === undefined || raw === '') return `http:${ctx.newId()}`;
  const key = Array.isArray(raw) ? raw.join(',') : raw;
  if (!IDEMPOTENCY_KEY.test(key)) {
    throw new FabricError(
      ApiErrorCode.invalidParams,
      400,
      'the Idempotency-Key header must be 1–128 of A-Za-z0-9._:-',
      { hint: 'send a uuid, or leave the header out', details: { header: 'idempotency-key' } },
    );
  }
  return `op:${me.actor}:${key}`;
}

export function metaOf(ctx: FabricContext, me: Identity, commandId: string, correlationId?: string): CommandMetadata {
  const meta: CommandMetadata = { commandId, actor: me.actor, at: nowIso(ctx) };
  if (correlationId !== undefined) meta.correlationId = correlationId;
  return meta;
}
