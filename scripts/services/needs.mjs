// Which services a set of compiled test files needs: a test needs a service when it, or a module it
// imports through a relative path (transitively), names the service's environment variable.
import { existsSync, readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';

export const SERVICE_VARS = {
  postgres: 'DATABASE_URL',
  kafka: 'KAFKA_BROKERS',
  chromium: 'CHROMIUM_PATH',
  compose: 'DOCKER_COMPOSE',
};

const IMPORT = /(?:import|export)\s[^'"]*?from\s*['"](\.{1,2}\/[^'"]+)['"]|import\s*\(?\s*['"](\.{1,2}\/[^'"]+)['"]/g;

/**
 * Each file's services, as `servicesNeeded([file])` gives them, reading every module once: Map file → Set of names.
 */
export function servicesNeededEach(files) {
  const modules = new Map();
  const moduleOf = (file) => {
    let m = modules.get(file);
    if (m === undefined) {
      const text = existsSync(file) ? readFileSync(file, 'utf8') : '';
      m = {
        named: Object.entries(SERVICE_VARS)
          .filter(([, name]) => text.includes(name))
          .map(([service]) => service),
        imports: [...text.matchAll(IMPORT)].map((x) => resolve(dirname(file), x[1] ?? x[2])),
      };
      modules.set(file, m);
    }
    return m;
  };
  const out = new Map();
  for (const root of files) {
    const seen = new Set();
    const needed = new Set();
    const stack = [root];
    while (stack.length > 0) {
      const file = stack.pop();
      if (seen.has(file)) continue;
      seen.add(file);
      const m = moduleOf(file);
      for (const s of m.named) needed.add(s);
      stack.push(...m.imports);
    }
    out.set(root, needed);
  }
  return out;
}

/** Returns the set of service names (keys of SERVICE_VARS) the files reference. */
export function servicesNeeded(files) {
  const seen = new Set();
  const needed = new Set();
  const stack = [...files];
  while (stack.length > 0) {
    const file = stack.pop();
    if (seen.has(file) || !existsSync(file)) continue;
    seen.add(file);
    const text = readFileSync(file, 'utf8');
    for (const [service, name] of Object.entries(SERVICE_VARS)) if (text.includes(name)) needed.add(service);
    for (const m of text.matchAll(IMPORT)) stack.push(resolve(dirname(file), m[1] ?? m[2]));
  }
  return needed;
}
