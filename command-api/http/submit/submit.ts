// Submitting a request: checks (model in the catalog and not disabled, every block compiles, the key's limits: its longest
// timeout, its queue and its storage), the SubmitRequest command under the id scoped to the caller
// (http/request-ids.ts), and idempotency by request id (the same body again: the request as it is; another
// body: 409).
import { FabricError } from '../../../protocol/errors.js';
import type { CommandOutcome } from '../../handlers/service.js';
import { requestStream } from '../../../domain/shared/ids.js';
import type { RouteDeps } from '../../../http/deps.js';
import { nowIso } from '../../../http/deps.js';
import { modelDisabled, unknownModel, unknownVariant } from '../../../http/errors.js';
import { type RegisteredEdit, variantEdit, visibleEdits } from '../../../projections/models/projection.js';
import { limitsOf, type EffectiveLimits } from '../../../http/key-limits.js';
import { scopedRequestId } from '../../../http/request-ids.js';
import type { Identity } from '../../../auth/keys.js';
import type { FabricContext } from '../../../fabric/context.js';
import { requestStatus } from '../../../projections/control-plane/status.js';
import { SubmitAdmission } from './admission.js';
import { checkBlockSource } from './block-check.js';
import { resolveTensors } from './tensor-refs.js';
import { differences, submissionOf } from './payload.js';
import type { SubmitBody } from './schema.js';

export interface SubmitAnswer {
  requestId: string;
  model: string;
  status: string;
  existing: boolean;
  logPosition: number | null;
  trusted: boolean;
  priority: boolean;
  links: { self: string; result: string; ws: string };
}

const admissions = new WeakMap<FabricContext, SubmitAdmission>();

function admissionOf(ctx: FabricContext): SubmitAdmission {
  let a = admissions.get(ctx);
  if (a === undefined) {
    a = new SubmitAdmission(ctx);
    admissions.set(ctx, a);
  }
  return a;
}

function checkTimeout(body: SubmitBody, limits: EffectiveLimits): void {
  if (body.timeoutMs === undefined || limits.maxTimeoutMs === null || body.timeoutMs <= limits.maxTimeoutMs) return;
  throw new FabricError(
    'API_TIMEOUT_OVER_LIMIT',
    400,
    `timeoutMs ${body.timeoutMs} is more than this key may ask for (${limits.maxTimeoutMs} ms)`,
    {
      hint: `ask for at most ${limits.maxTimeoutMs} ms, or leave timeoutMs out for the deployment's limit; an operator can raise the key's maxTimeoutMs`,
      details: { timeoutMs: body.timeoutMs, maxTimeoutMs: limits.maxTimeoutMs },
    },
  );
}

export async function submit(deps: RouteDeps, me: Identity, body: SubmitBody): Promise<SubmitAnswer> {
  const { ctx } = deps;
  const at = body.model.indexOf('@');
  const modelKey = at < 0 ? body.model : body.model.slice(0, at);
  const entry = ctx.catalog.get(modelKey);
  if (entry === undefined)
    throw unknownModel(
      modelKey,
      ctx.catalog.list().map((e) => e.key),
    );
  if (entry.disabled !== undefined) throw modelDisabled(modelKey, entry.disabled);
  let edit: RegisteredEdit | undefined;
  if (at >= 0) {
    const found = variantEdit(ctx.view.state.models, body.model, me.actor);
    if (found.edit === undefined)
      throw unknownVariant(
        body.model,
        found.model === undefined ? [] : visibleEdits(found.model, me.actor, false).map((e) => e.variant),
      );
    edit = found.edit;
  }
  if (body.block !== undefined) checkBlockSource(body.block, 'shared');
  body.invokes?.forEach((inv, i) => {
    if (inv.block !== undefined) checkBlockSource(inv.block, i);
  });
  body.traces?.forEach((t, k) => {
    if (t.block !== undefined) checkBlockSource(t.block, 'shared', k);
    t.invokes.forEach((inv, i) => {
      if (inv.block !== undefined) checkBlockSource(inv.block, i, k);
    });
  });
  const limits = limitsOf(me, deps.config);
  checkTimeout(body, limits);
  const s = submissionOf(body, me.tags);
  if (edit !== undefined) s.payload.edit = { key: edit.variant, source: edit.source };
  if (body.tensors !== undefined && body.tensors.length > 0)
    s.payload.tensors = await resolveTensors(ctx, me, body.tensors, deps.config.tensorMaxBytes);
  const clientId = body.requestId ?? ctx.newId();
  const requestId = scopedRequestId(me, clientId);
  const admitted = await admissionOf(ctx).admit(
    me.actor,
    limits,
    async () => (await ctx.store.readStream(requestStream(requestId), { limit: 1 })).length > 0,
  );
  let out: CommandOutcome | undefined;
  try {
    out = await ctx.commands.execute(
      {
        type: 'SubmitRequest',
        requestId,
        modelKey,
        submitter: me.actor,
        ...(edit === undefined
          ? {}
          : { edit: { variant: edit.variant, name: edit.name, fingerprint: edit.fingerprint, author: edit.author } }),
        priority: s.priority,
        trusted: s.trusted,
        payload: s.payload,
        options: {
          ...s.options,
          ...(limits.maxTimeoutMs === null ? {} : { maxTimeoutMs: limits.maxTimeoutMs }),
          ...(limits.maxRunning === null ? {} : { maxRunning: limits.maxRunning }),
        },
      },
      { commandId: `submit:${requestId}`, actor: me.actor, at: nowIso(ctx), correlationId: requestId },
    );
  } finally {
    admitted(out?.events.length === 0 || out?.alreadyStored ? undefined : out?.position);
  }
  let existing = false;
  let status = 'RECEIVED';
  let logPosition = out.position ?? null;
  if (out.alreadyStored || out.events.length === 0) {
    // The id was submitted before by this caller for this model (the decider refuses anyone else): the same body
    // is the same request; another body is refused rather than silently answered with the first one.
    const [first] = await ctx.store.readStream(requestStream(requestId), { limit: 1 });
    const recorded = (first?.data ?? {}) as Parameters<typeof differences>[0];
    const differs = differences(recorded, s);
    if (differs.length > 0) {
      throw new FabricError(
        'API_REQUEST_ID_REUSED',
        409,
        `request id ${clientId} was already submitted with another ${differs.join(', ')}`,
        {
          hint: 'send a new request id for a new request (or leave requestId out and the server picks one)',
          details: { requestId: clientId, differs },
        },
      );
    }
    existing = true;
    logPosition = first?.position ?? null;
    status = requestStatus(ctx.view.state, requestId)?.status ?? 'RECEIVED';
  }
  const self = `/requests/${encodeURIComponent(clientId)}`;
  return {
    requestId: clientId,
    model: body.model,
    status,
    existing,
    logPosition,
    trusted: s.trusted,
    priority: s.priority,
    links: { self, result: `${self}/result`, ws: '/ws' },
  };
}
