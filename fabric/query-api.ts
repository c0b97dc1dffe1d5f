// Entry point of the query API process in distributed mode (docker-compose's query-api service). Auth is on
// unless NDIF_AUTH=off; share NDIF_RESULT_SECRET between query API replicas so result URLs work on each.
import { buildQueryApi } from '../query-api/build.js';
import { runApiProcess } from './api-process.js';

await runApiProcess('query-api', (ctx) => buildQueryApi(ctx));
