// Request ids are scoped to their submitter. With auth on, the id a client chooses (or the server picks for it)
// names the request only within its key: the fabric records `<keyId>:<id>`, so no key can take, probe or read an
// id another key uses, and another key's id answers exactly like an id that does not exist (it is looked up in
// the caller's own scope, where it does not). Operators name any request by its full id (their own by either).
// With auth off there is one caller and ids are recorded as given.
import type { Identity } from '../auth/keys.js';
import { requestStream } from '../domain/shared/ids.js';
import type { FabricContext } from '../fabric/context.js';

/** The id the fabric records for `id` as chosen by `me`. */
export function scopedRequestId(me: Identity, id: string): string {
  return me.auth && me.keyId !== null ? `${me.keyId}:${id}` : id;
}

/** The id `me` knows a recorded request by: its own requests without the scope, others' (operators) in full. */
export function displayRequestId(me: Identity, recorded: string): string {
  if (!me.auth || me.keyId === null) return recorded;
  const prefix = `${me.keyId}:`;
  return recorded.startsWith(prefix) ? recorded.slice(prefix.length) : recorded;
}

/**
 * The recorded ids a name given by `me` may stand for, in the order to try: its own scope first; for an operator
 * also the name as a full id.
 */
export function candidateRequestIds(me: Identity, id: string): string[] {
  const own = scopedRequestId(me, id);
  return me.tags.operator && own !== id ? [own, id] : [own];
}

/**
 * The recorded id a name given by `me` stands for: its own scope, unless `me` is an operator and only the full id
 * names a request. Looks nothing up for anyone else (so a miss costs the same as any other miss).
 */
export async function resolveRequestId(
  ctx: Pick<FabricContext, 'view' | 'store'>,
  me: Identity,
  id: string,
): Promise<string> {
  const [own, full] = candidateRequestIds(me, id);
  if (full === undefined) return own!;
  if (
    ctx.view.state.requests.byId.has(own!) ||
    (await ctx.store.readStream(requestStream(own!), { limit: 1 })).length > 0
  )
    return own!;
  return full;
}
