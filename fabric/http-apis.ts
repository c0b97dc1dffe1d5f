// The HTTP APIs' builders for a composition root: the command API, the query API, and both on one port (embedded).
export { buildCommandApi, registerCommandRoutes, COMMAND_CAPABILITIES } from '../command-api/http/build.js';
export { buildFabricServer, type FabricServerOptions } from './embedded/http-server.js';
export { buildQueryApi, registerQueryRoutes, type QueryApiOptions } from '../query-api/build.js';
export type { ApiContext, RouteDeps } from '../http/deps.js';
export {
  apiConfigFromEnv,
  resolveApiConfig,
  DEFAULT_API_CONFIG,
  type ApiConfig,
  type ApiConfigInput,
} from '../http/config.js';
export type { QueryRoutes } from '../query-api/routes/types.js';
