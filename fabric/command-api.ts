// Entry point of the command API process in distributed mode (docker-compose's command-api service). Auth is on
// unless NDIF_AUTH=off. See fabric/api-process.ts for the settings.
import { buildCommandApi } from '../command-api/http/build.js';
import { runApiProcess } from './api-process.js';

await runApiProcess('command-api', buildCommandApi);
