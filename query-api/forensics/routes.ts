// The forensics routes of the query API, for operators: GET /audit (indexed audit queries), GET /why/:id (the causal
// chain of a request, replica or agent), GET /replay?to= (the control plane as it was, rebuilt in a throwaway store;
// with from= also what changed between the two points). JSON by default; ?format=text gives what `ndif` prints.
// Query strings are checked by zod (API_INVALID_PARAMS); audit filters by forensics/audit.ts, so a filter on
// metadata the log never recorded is refused with AUDIT_FILTER_NOT_RECORDED rather than ignored.
import { tmpdir } from 'node:os';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { z } from 'zod';
import type { RouteDeps } from '../../http/deps.js';
import { parseInput } from '../../http/validate.js';
import { auditEvents, RECORDED_FILTERS } from '../../forensics/audit.js';
import { renderAudit } from '../../forensics/audit-text.js';
import { forensicsError, ForensicsErrorCode } from '../../forensics/errors.js';
import { diffReplays } from '../../forensics/replay-diff.js';
import { renderReplay, renderReplayDiff } from '../../forensics/replay-text.js';
import { replayTo } from '../../forensics/replay.js';
import { explainWhy } from '../../forensics/why.js';
import type { AuditIndexFilter } from '../../projections/read-models/port.js';
import { renderWhy } from '../../forensics/why-text.js';

export interface ForensicsRouteOptions {
  /** Where replays make their throwaway stores. Default os.tmpdir(). */
  tmpRoot?: string;
  /** Largest replay (events copied). Default 2,000,000. */
  maxReplayEvents?: number;
}

const format = z.enum(['json', 'text']).optional();
const flag = z.enum(['true', 'false']).optional();
const count = (max: number) =>
  z
    .string()
    .regex(/^\d{1,15}$/, 'a non-negative integer')
    .transform(Number)
    .refine((n) => n <= max, `at most ${max}`)
    .optional();

// Known filters are strings here; forensics/audit.ts checks their values and refuses every other name.
const auditQuery = z
  .object({ format, data: flag, afterPosition: count(Number.MAX_SAFE_INTEGER), limit: count(10_000) })
  .catchall(z.string({ error: 'a filter is given once, as text' }));

const whyQuery = z.strictObject({
  format,
  kind: z.enum(['request', 'replica', 'agent']).optional(),
  depth: count(32),
  effects: count(200),
  positions: flag,
});
const whyParams = z.strictObject({ id: z.string().min(1).max(200) });

const replayQuery = z.strictObject({
  format,
  to: z.string().min(1).max(40),
  from: z.string().min(1).max(40).optional(),
  queue: count(1000),
});

function send(reply: FastifyReply, fmt: 'json' | 'text' | undefined, json: unknown, text: () => string) {
  if (fmt === 'text') return reply.type('text/plain; charset=utf-8').send(`${text()}\n`);
  return reply.send(json);
}

export function forensicsRoutes(app: FastifyInstance, deps: RouteDeps, options: ForensicsRouteOptions = {}): void {
  const { ctx } = deps;
  for (const c of ['audit', 'why', 'replay']) deps.capabilities.add(c);
  const replayOptions = { tmpRoot: options.tmpRoot ?? tmpdir(), maxEvents: options.maxReplayEvents };
  let replaying = false;

  app.get('/audit', { config: { access: 'operator' } }, async (req, reply) => {
    const q = parseInput(auditQuery, req.query, 'query');
    const { format: fmt, data, ...filter } = q;
    const audit = async () => {
      await ctx.view.catchUp(5000);
      return ctx.view.state.audit;
    };
    const rm = ctx.readModels?.audit;
    // With the audit read model (distributed mode) every filter is answered from it, once it holds everything stored.
    const index =
      rm === undefined
        ? undefined
        : {
            positions: async (f: AuditIndexFilter) => {
              await rm.catchUp(5000);
              return rm.positions(f);
            },
          };
    const am = ctx.auditModels;
    const modelIndex =
      am === undefined
        ? undefined
        : {
            positions: async (modelKey: string, afterPosition: number, limit: number) => {
              await am.catchUp(5000);
              return am.positions(modelKey, afterPosition, limit);
            },
          };
    const answer = await auditEvents({ store: ctx.store, audit, index, modelIndex }, filter, {
      data: data === 'true',
    });
    return send(reply, fmt, { ...answer, recordedFilters: Object.keys(RECORDED_FILTERS) }, () => renderAudit(answer));
  });

  app.get('/why/:id', { config: { access: 'operator' } }, async (req, reply) => {
    const { id } = parseInput(whyParams, req.params, 'params');
    const q = parseInput(whyQuery, req.query, 'query');
    const report = await explainWhy(ctx.store, id, {
      kind: q.kind,
      maxDepth: q.depth,
      maxEffects: q.effects,
      queuePositions: q.positions !== 'false',
    });
    return send(reply, q.format, report, () => renderWhy(report));
  });

  app.get('/replay', { config: { access: 'operator' } }, async (req, reply) => {
    const q = parseInput(replayQuery, req.query, 'query');
    // A replay copies the log prefix and folds it: one at a time per process.
    if (replaying)
      throw forensicsError(ForensicsErrorCode.replayBusy, 'another replay is running on this server', {
        hint: 'retry when it has finished',
      });
    replaying = true;
    try {
      const opts = { ...replayOptions, queueLimit: q.queue };
      const to = await replayTo(ctx.store, q.to, opts);
      if (q.from === undefined) return send(reply, q.format, to, () => renderReplay(to));
      const from = await replayTo(ctx.store, q.from, opts);
      const diff = diffReplays(from, to);
      return send(reply, q.format, { diff, from, to }, () => renderReplayDiff(diff));
    } finally {
      replaying = false;
    }
  });
}
