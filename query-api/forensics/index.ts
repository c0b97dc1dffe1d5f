// The forensics route module of the query API (a QueryRoutes: register it in QUERY_ROUTES or QueryApiOptions.plugins).
export { forensicsRoutes, type ForensicsRouteOptions } from './routes.js';
