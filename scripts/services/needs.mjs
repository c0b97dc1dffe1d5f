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

/** Reads a compiled module once: the services it names and the relative modules it imports (absent: none). */
function moduleReader() {
  const modules = new Map();
  return (file) => {
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
}

/** The services the modules `roots` and what they import (transitively) name. */
function walk(roots, moduleOf) {
  const seen = new Set();
  const needed = new Set();
  const stack = [...roots];
  while (stack.length > 0) {
    const file = stack.pop();
    if (seen.has(file)) continue;
    seen.add(file);
    const m = moduleOf(file);
    for (const s of m.named) needed.add(s);
    stack.push(...m.imports);
  }
  return needed;
}

/**
 * Each file's services, as `servicesNeeded([file])` gives them, reading every module once: Map file → Set of names.
 */
export function servicesNeededEach(files) {
  const moduleOf = moduleReader();
  return new Map(files.map((f) => [f, walk([f], moduleOf)]));
}

/** Returns the set of service names (keys of SERVICE_VARS) the files reference. */
export function servicesNeeded(files) {
  return walk(files, moduleReader());
}
