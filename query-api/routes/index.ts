// Every route module of the query API, registered in this order by buildQueryApi and buildFabricServer.
// An extension (e.g. forensics' audit, replay and why routes) adds its module here or passes it in
// `QueryApiOptions.plugins` (docs/http-api.md, "Extending the query API").
import { forensicsRoutes } from '../forensics/routes.js';
import { clusterRoutes } from './cluster.js';
import { liveRoutes } from './live.js';
import { modelRoutes } from './models.js';
import { pageRoutes } from './page.js';
import { requestQueryRoutes } from './requests.js';
import { tokenizerRoutes } from './tokenizer.js';
import type { QueryRoutes } from './types.js';

export const QUERY_ROUTES: QueryRoutes[] = [
  requestQueryRoutes,
  clusterRoutes,
  modelRoutes,
  tokenizerRoutes,
  liveRoutes,
  pageRoutes,
  forensicsRoutes,
];
export type { QueryRoutes } from './types.js';
