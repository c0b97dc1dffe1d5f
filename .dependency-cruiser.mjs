// The layering of docs/architecture.md ("Source layout") as rules: every import must match one `allowed` rule, so
// an arrow the table does not have fails `npm run lint` (scripts/check-layers.mjs runs it). An arrow the table
// allows for types only is checked twice: the TypeScript sources may have it, the compiled JavaScript (dist/, where
// `import type` is gone) may not. Keep this file and the table in step.
const NODE = { dependencyTypes: ['core'] };

/** Arrows allowed for types only: [from, to] path regexes. */
export const typeOnlyArrows = [];

/** `from` may import the folders (path regexes) in `to`; with `typesOnly`, as types only. */
const may = (from, to, comment, typesOnly = false) => {
  if (typesOnly) typeOnlyArrows.push({ from, to, comment });
  return { comment, from: { path: from }, to: { path: to } };
};
const pkg = (from, names, comment) => ({
  comment,
  from: { path: from },
  to: { path: `^node_modules/(${names.join('|')})/` },
});
const core = (from, comment) => ({ comment, from: { path: from }, to: NODE });

const EVERYTHING = '';
const RUNTIME_PUBLIC = '^gpu-agent/runtime/(index|formats)\\.[jt]s$';

/** @type {import('dependency-cruiser').IConfiguration} */
export default {
  allowed: [
    // Within a folder, anything goes.
    {
      comment: 'a folder imports its own files',
      from: { path: '^([^/]+)/' },
      to: { path: '^$1/' },
    },
    {
      comment: 'each part of the agent imports its own files',
      from: { path: '^gpu-agent/([^/]+)/' },
      to: { path: '^gpu-agent/$1/' },
    },
    // Composition roots, benches, tests and scripts may use everything (bench/ reaches the runtime through its
    // public entries only: the forbidden rule below).
    may('^(fabric|bench|tests|scripts)/', EVERYTHING, 'composition roots, benches, tests, scripts'),
    core('^(fabric|bench|tests|scripts)/', 'composition roots, benches, tests, scripts'),

    // protocol/: nothing but zod.
    pkg('^protocol/', ['zod'], 'protocol/: schemas only'),
    // domain/: pure.
    may('^domain/', '^protocol/', 'domain/ → protocol/'),
    pkg('^domain/', ['zod'], 'domain/ → zod'),
    // eventstore/
    may('^eventstore/', '^protocol/', 'eventstore/ → protocol/'),
    may('^eventstore/', '^domain/', 'eventstore/ → domain/ types', true),
    pkg('^eventstore/', ['better-sqlite3', 'pg', '@kurrent'], 'eventstore/ adapters'),
    core('^eventstore/', 'eventstore/ adapters'),
    // projections/
    may('^projections/', '^(domain|protocol)/', 'projections/ → domain/, protocol/'),
    may('^projections/', '^eventstore/', 'projections/ → eventstore/ types', true),
    pkg('^projections/', ['pg', 'better-sqlite3'], 'projections/read-models'),
    // scheduler/
    may('^scheduler/', '^(domain|protocol|projections)/', 'scheduler/ → domain/, protocol/, projections/'),
    may('^scheduler/', '^eventstore/', 'scheduler/ → eventstore/ types', true),
    // command-api/
    may(
      '^command-api/',
      '^(domain|protocol|eventstore|projections|scheduler|auth|http|block-source)/',
      'command-api/ → the control plane below it, auth/, http/, the block check',
    ),
    may('^command-api/', '^catalog/', 'command-api/ → catalog/ (registering a model folder)'),
    may('^command-api/', '^blobstore/', 'command-api/ → blobstore/ (uploaded tensors streamed in)'),
    may('^command-api/', '^fabric/context\\.[jt]s$', 'command-api/ → fabric/context.ts types', true),
    pkg('^command-api/', ['fastify', 'zod'], 'command-api/ HTTP'),
    core('^command-api/', 'command-api/'),
    // query-api/
    may(
      '^query-api/',
      '^(domain|protocol|projections|forensics|auth|http|catalog)/',
      'query-api/ → read side, forensics/, auth/, http/, catalog/',
    ),
    may('^query-api/', '^eventstore/', 'query-api/ → eventstore/ types', true),
    may('^query-api/', '^fabric/context\\.[jt]s$', 'query-api/ → fabric/context.ts types', true),
    pkg('^query-api/', ['fastify', 'zod', 'ws'], 'query-api/ HTTP and websocket'),
    core('^query-api/', 'query-api/'),
    // auth/
    may('^auth/', '^protocol/', 'auth/ → protocol/'),
    pkg('^auth/', ['better-sqlite3', 'pg'], 'auth/ key stores'),
    core('^auth/', 'auth/ hashing'),
    // http/
    may('^http/', '^(auth|protocol|metrics|domain)/', 'http/ → auth/, protocol/, metrics/, domain/'),
    may('^http/', '^fabric/context\\.[jt]s$', 'http/ → fabric/context.ts types', true),
    pkg('^http/', ['fastify', 'pino', 'zod', 'prom-client'], 'http/ (prom-client: the failed-authentication counter)'),
    core('^http/', 'http/'),
    // forensics/
    may('^forensics/', '^(domain|protocol|projections)/', 'forensics/ → domain/, protocol/, projections/'),
    may('^forensics/', '^eventstore/', 'forensics/ → eventstore/'),
    core('^forensics/', 'forensics/ (the CLI writes a file)'),
    // metrics/
    may('^metrics/', '^(projections|protocol)/', 'metrics/ → projections/, protocol/'),
    may(
      '^metrics/',
      '^(eventstore|transport/relay|gpu-agent/agent|sandbox)/',
      'metrics/ → the types it measures',
      true,
    ),
    pkg('^metrics/', ['prom-client', 'fastify'], 'metrics/'),
    // transport/
    may('^transport/', '^protocol/', 'transport/ → protocol/'),
    may('^transport/(?!relay/)', '^(domain|projections)/', 'transport/ → domain/, projections/ types', true),
    may('^transport/relay/', '^projections/', 'the relay → projections/ types', true),
    may('^transport/relay/', '^(domain|eventstore|blobstore)/', 'the relay → domain/, eventstore/, blobstore/'),
    may('^transport/relay/', '^command-api/handlers/', 'the relay → command-api/handlers/ types', true),
    pkg('^transport/', ['kafkajs', 'pino', 'zod'], 'transport/ adapters'),
    core('^transport/', 'transport/ adapters'),
    // blobstore/
    may('^blobstore/', '^protocol/', 'blobstore/ → protocol/'),
    pkg('^blobstore/', ['pg', 'better-sqlite3'], 'blobstore/ PostgreSQL; the files store keeps small blobs in SQLite'),
    core('^blobstore/', 'blobstore/ files'),
    // block-source/: the block source check.
    may('^block-source/', '^protocol/', 'block-source/ → protocol/'),
    pkg('^block-source/', ['acorn'], 'block-source/ parses with acorn'),
    core('^block-source/', 'block-source/ compiles with node:vm'),
    // gpu-agent/
    may('^gpu-agent/(runtime|block)/', '^protocol/', 'the runtime and the block side → protocol/'),
    may('^gpu-agent/runtime/', '^block-source/', 'the runtime checks a block before compiling it'),
    pkg('^gpu-agent/runtime/', ['onnxruntime-node', 'protobufjs', '@huggingface/tokenizers'], 'the runtime'),
    core('^gpu-agent/(runtime|block)/', 'the runtime and the block side'),
    may(
      '^gpu-agent/agent/',
      '^(gpu-agent|transport|sandbox|catalog|protocol|domain|blobstore)/',
      'the agent process → gpu-agent/*, transport/, sandbox/, catalog/, protocol/, domain/, blobstore/',
    ),
    pkg('^gpu-agent/agent/', ['pino'], 'the agent process'),
    core('^gpu-agent/agent/', 'the agent process'),
    // catalog/
    may('^catalog/', '^(protocol|domain|projections)/', 'catalog/ → protocol/, domain/, projections/'),
    may('^catalog/', '^(command-api/handlers|scheduler)/', 'catalog/ → command-api/handlers/, scheduler/ types', true),
    may('^catalog/', RUNTIME_PUBLIC, "catalog/ → the runtime's public entries"),
    pkg('^catalog/', ['pino'], 'catalog/'),
    core('^catalog/', 'catalog/ reads model folders'),
    // sandbox/
    may('^sandbox/', '^(gpu-agent/block|protocol)/', 'sandbox/ → gpu-agent/block/, protocol/'),
    core('^sandbox/', 'sandbox/ processes and sockets'),
    // client/
    may('^client/', '^protocol/', 'client/ → protocol/'),
    may(
      '^client/',
      '^gpu-agent/block/api/(tensor|block-context)\\.[jt]s$',
      "client/ → the blocks' Tensor (and its context type)",
    ),
    may('^client/', '^auth/key-format\\.ts$', 'client/ → auth/key-format.ts (ndif keys new)'),
    pkg('^client/', ['ws', '@huggingface/tokenizers'], 'client/ packages'),
    // The SDK's local mode runs the agent's runtime in-process behind one module, with the command API's own checks.
    may(
      '^client/sdk/local/',
      `${RUNTIME_PUBLIC}|^gpu-agent/block/index\\.[jt]s$|^gpu-agent/agent/(failure|token-stream|run-meta)\\.[jt]s$`,
      "client/sdk/local/ → the agent's runtime (public entries) and block side",
    ),
    may(
      '^client/sdk/local/',
      '^command-api/http/submit/(block-check|payload|schema)\\.[jt]s$',
      "client/sdk/local/ → the command API's submission checks",
    ),
    core('^client/', 'client/'),
  ],
  allowedSeverity: 'error',
  forbidden: [
    {
      name: 'runtime-internals',
      comment: 'outside gpu-agent/, the runtime is reached through its public entries (index.ts, formats.ts)',
      severity: 'error',
      from: { path: '^(?!gpu-agent/|tests/)' },
      to: { path: '^gpu-agent/runtime/', pathNot: RUNTIME_PUBLIC },
    },
    {
      name: 'no-cycles-across-folders',
      comment: 'folders import each other one way',
      severity: 'error',
      from: { path: '^([^/]+)/' },
      to: { circular: true, pathNot: '^$1/' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    // `.cache/` and `data/` (the model and catalog caches and fabric data the tests write, at the root) are left out of
    // the walk that decides whether the cache is fresh: a test run leaves new files there, and any new .json in the
    // walk makes scripts/check-layers.mjs cruise everything again.
    exclude: { path: '(^|/)(dist|dist-[^/]*|node_modules/.*/node_modules)/|^(\\.cache|data)/' },
    parser: 'swc',
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { extensions: ['.ts', '.js', '.mjs'], conditionNames: ['import', 'node', 'default'] },
  },
};
