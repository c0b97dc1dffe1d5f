// Submitting a request: checks (model in the catalog, every block compiles), the SubmitRequest command, and
// idempotency by request id (the same body again: the request as it is; another body: 409).
import { FabricError } from '../../../protocol/errors.js';
import { requestStream } from '../../../domain/shared/ids.js';
import type { RouteDeps } from '../../../http/deps.js';
import { nowIso } from '../../../http/deps.js';
import { unknownModel } from '../../../http/errors.js';
import type { Identity } from '../../../auth/keys.js';
import { requestStatus } from '../../../projections/control-plane/status.js';
import { checkBlockSource } from './block-check.js';
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

export async function submit(deps: RouteDeps, me: Identity, body: SubmitBody): Promise<SubmitAnswer> {
  const { ctx } = deps;
  if (ctx.catalog.get(body.model) === undefined) throw unknownModel(body.model, ctx.catalog.list().map((e) => e.key));
  if (body.block !== undefined) checkBlockSource(body.block, 'shared');
  body.invokes.forEach((inv, i) => {
    if (inv.block !== undefined) checkBlockSource(inv.block, i);
  });
  const s = submissionOf(body, me.tags);
  const requestId = body.requestId ?? ctx.newId();
  const out = await ctx.commands.execute(
    { type: 'SubmitRequest', requestId, modelKey: body.model, submitter: me.actor, priority: s.priority, trusted: s.trusted, payload: s.payload, options: s.options },
    { commandId: `submit:${requestId}`, actor: me.actor, at: nowIso(ctx), correlationId: requestId },
  );
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
      throw new FabricError('API_REQUEST_ID_REUSED', 409, `request id ${requestId} was already submitted with another ${differs.join(', ')}`, {
        hint: 'send a new request id for a new request (or leave requestId out and the server picks one)',
        details: { requestId, differs },
      });
    }
    existing = true;
    logPosition = first?.position ?? null;
    status = requestStatus(ctx.view.state, requestId)?.status ?? 'RECEIVED';
  }
  const self = `/requests/${encodeURIComponent(requestId)}`;
  return { requestId, model: body.model, status, existing, logPosition, trusted: s.trusted, priority: s.priority, links: { self, result: `${self}/result`, ws: '/ws' } };
}
