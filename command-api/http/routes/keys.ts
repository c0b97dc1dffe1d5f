// Operators' API key routes: create (the secret is in this answer only), list, revoke.
import type { FastifyInstance } from 'fastify';
import { callerOf } from '../../../http/access.js';
import type { RouteDeps } from '../../../http/deps.js';
import { nowIso } from '../../../http/deps.js';
import { parseInput } from '../../../http/validate.js';
import { noKeyStore } from '../../../auth/errors.js';
import type { ApiKeys } from '../../../auth/keys.js';
import type { KeyTags } from '../../../auth/port.js';
import { createKeySchema, keyIdParams, noBody } from '../schemas.js';

export function keyRoutes(app: FastifyInstance, deps: RouteDeps): void {
  const operator = { config: { access: 'operator' as const } };
  const keys = (): ApiKeys => {
    if (deps.keys === undefined) throw noKeyStore();
    return deps.keys;
  };

  app.post('/keys', operator, async (req, reply) => {
    const me = callerOf(req);
    const b = parseInput(createKeySchema, req.body ?? {}, 'body');
    const tags: KeyTags = { trusted: b.trusted ?? false, priority: b.priority ?? false, operator: b.operator ?? false };
    if (b.limits !== undefined && Object.keys(b.limits).length > 0) tags.limits = b.limits;
    const { key, summary } = await keys().create({ label: b.label, tags }, me.actor, nowIso(deps.ctx));
    req.log.info({ keyId: summary.id, tags, by: me.actor }, `API key ${summary.id} created by ${me.actor}`);
    return reply
      .code(201)
      .send({ id: summary.id, key, label: summary.label, tags: summary.tags, createdAt: summary.createdAt });
  });

  app.get('/keys', operator, async () => ({ keys: await keys().list() }));

  app.post('/keys/:id/revoke', operator, async (req) => {
    const me = callerOf(req);
    const { id } = parseInput(keyIdParams, req.params, 'params');
    parseInput(noBody, req.body, 'body');
    const k = await keys().revoke(id, me.actor, nowIso(deps.ctx));
    req.log.info({ keyId: id, by: me.actor }, `API key ${id} revoked by ${me.actor}`);
    return { id: k.id, revokedAt: k.revokedAt };
  });
}
