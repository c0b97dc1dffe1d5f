// Zod parsing of bodies, query strings and path parameters into FabricErrors naming the field.
import type { z } from 'zod';
import { invalidInput, type Issue } from './errors.js';

export function parseInput<S extends z.ZodType>(
  schema: S,
  value: unknown,
  where: 'body' | 'query' | 'params',
): z.infer<S> {
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  const issues: Issue[] = r.error.issues.map((i) => {
    const keys = (i as { keys?: string[] }).keys;
    const message =
      i.code === 'unrecognized_keys' && keys !== undefined
        ? `unknown field${keys.length > 1 ? 's' : ''} ${keys.map((k) => JSON.stringify(k)).join(', ')}`
        : i.message;
    return { path: i.path.map(String).join('.'), message };
  });
  throw invalidInput(where, issues);
}
