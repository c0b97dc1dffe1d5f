// Entry point of the gateway process in distributed mode (docker-compose's gateway service): one URL for the SDK
// and the `ndif` CLI in front of the command API and the query API (fabric/gateway/route.ts says which takes what).
//   NDIF_COMMAND_API_URL  default http://command-api:8080
//   NDIF_QUERY_API_URL    default http://query-api:8081
//   HOST/PORT (or NDIF_HOST/NDIF_PORT)  default 0.0.0.0:8000
// Prints `gateway listening on <url> (…)` once up; exits 0 on SIGTERM/SIGINT.
import type { AddressInfo } from 'node:net';
import { FabricError } from '../protocol/errors.js';
import { createGateway } from './gateway/proxy.js';
import { processLogger } from './log.js';

const log = processLogger('gateway');

function upstream(name: string, fallback: string): URL {
  const raw = process.env[name] || fallback;
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw new FabricError('FABRIC_CONFIG_INVALID', 500, `${name}=${JSON.stringify(raw)} is not a URL`, {
      hint: `set ${name}=http://host:port`,
    });
  }
  if (u.protocol !== 'http:')
    throw new FabricError('FABRIC_CONFIG_INVALID', 500, `${name}=${JSON.stringify(raw)} must be an http:// URL`, {
      hint: 'the gateway reaches the API processes over plain HTTP inside the deployment',
    });
  return u;
}

async function main(): Promise<void> {
  const env = process.env;
  const command = upstream('NDIF_COMMAND_API_URL', 'http://command-api:8080');
  const query = upstream('NDIF_QUERY_API_URL', 'http://query-api:8081');
  const rawPort = env.PORT ?? env.NDIF_PORT ?? '8000';
  const port = Number(rawPort);
  if (!/^[0-9]+$/.test(rawPort) || port > 65535)
    throw new FabricError('FABRIC_CONFIG_INVALID', 500, `PORT=${JSON.stringify(rawPort)} is not a port (0-65535)`, {
      hint: 'fix PORT or unset it for 8000',
    });
  const host = env.HOST ?? env.NDIF_HOST ?? '0.0.0.0';
  const server = createGateway({ command, query });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const bound = (server.address() as AddressInfo).port;
  process.stdout.write(
    `gateway listening on http://${host}:${bound} (command API ${command.origin}, query API ${query.origin})\n`,
  );
  const stop = () => {
    server.close(() => process.exit(0));
    server.closeAllConnections();
    setTimeout(() => process.exit(0), 5000).unref();
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

main().catch((err: unknown) => {
  log.fatal({ err }, 'gateway failed to start');
  process.stderr.write(`gateway: ${(err as Error).message}\n`);
  setTimeout(() => process.exit(1), 100);
});
