// The query API (fastify + ws): request status and results, the status websocket, views, the status page.
export { buildQueryApi, registerQueryRoutes, QUERY_CAPABILITIES, type QueryApiOptions } from './build.js';
export type { QueryRoutes } from './routes/types.js';
export { signResultToken, verifyResultToken } from './results/token.js';
export { parseCursor, formatCursor } from './status/cursor.js';
