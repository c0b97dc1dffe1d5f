// A Compose CLI to validate docker-compose.yml (`config -q`; no Docker engine is needed for that).
// Prefers the `docker compose` plugin; falls back to Debian's docker-compose package.
import { existsSync } from 'node:fs';
import { aptInstall } from './apt.mjs';
import { run } from './procs.mjs';

async function works(cmd, args) {
  try {
    return (await run(cmd, [...args, 'version'])).code === 0;
  } catch {
    return false;
  }
}

/** Returns { env: { DOCKER_COMPOSE } }: a JSON array, the command that runs Compose. */
export async function ensureCompose() {
  if (process.env.DOCKER_COMPOSE) return { env: { DOCKER_COMPOSE: process.env.DOCKER_COMPOSE } };
  if (await works('docker', ['compose'])) return { env: { DOCKER_COMPOSE: JSON.stringify(['docker', 'compose']) } };
  if (!existsSync('/usr/bin/docker-compose'))
    await aptInstall(['docker-compose'], 'Compose to validate docker-compose.yml');
  if (await works('/usr/bin/docker-compose', []))
    return { env: { DOCKER_COMPOSE: JSON.stringify(['/usr/bin/docker-compose']) } };
  throw new Error('no working Compose CLI: neither `docker compose` nor /usr/bin/docker-compose runs');
}
