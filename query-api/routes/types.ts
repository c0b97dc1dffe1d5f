// A query API route module: routes registered on an instance whose edge (auth, protocol check, rate limit,
// errors) is installed. Forensics and other extensions are route modules too (docs/http-api.md, "Extending").
import type { FastifyInstance } from 'fastify';
import type { RouteDeps } from '../../http/deps.js';

export type QueryRoutes = (app: FastifyInstance, deps: RouteDeps) => void | Promise<void>;
