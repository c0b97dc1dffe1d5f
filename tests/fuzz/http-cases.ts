// fast-check arbitraries for HTTP calls to every route of the fabric's APIs: the route's method (or another),
// its path with fuzzed ids (valid, unknown, unicode, percent-garbage, too long), query strings, headers (keys
// right, wrong and malformed; protocol versions; media types; idempotency keys) and bodies (the route's shape
// with fuzzed fields, any JSON, broken JSON, too large).
import fc from 'fast-check';

export interface HttpCase {
  method: string;
  url: string;
  headers: Record<string, string>;
  /** Raw body text (undefined: none). */
  body: string | undefined;
  /** The route it aims at (for the summary). */
  route: string;
}

export interface Keys {
  operator: string;
  user: string;
}

const VALID_BLOCK = 'async (m) => { const h = await m.transformer.h[0].output; return h; }';

const text = fc.oneof(
  fc.string({ maxLength: 20 }),
  fc.string({ unit: 'grapheme', maxLength: 12 }),
  fc.string({ unit: 'binary', maxLength: 12 }),
  fc.constantFrom(
    '',
    ' ',
    '..',
    '.',
    '%',
    '%00',
    '%zz',
    '%2F',
    '%23',
    '#',
    '?',
    '\u0000',
    'null',
    'undefined',
    '__proto__',
    'constructor',
  ),
);

const id = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.constantFrom('seed-1', 'seed-2', 'r-01', 'gpt2-tiny', 'gpt2-tiny#1', 'local-agent', 'nope'),
  },
  { weight: 2, arbitrary: fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9._:-]{0,20}$/) },
  { weight: 2, arbitrary: text },
  { weight: 1, arbitrary: fc.integer({ min: 120, max: 700 }).map((n) => 'x'.repeat(n)) },
);

/** A path segment: encoded as a client should, or raw (maybe undecodable). */
const segment = fc
  .tuple(id, fc.boolean())
  .map(([s, encode]) => (encode ? encodeURIComponent(s) : s.replace(/[/?#\s]/g, '_')));

const anyValue: fc.Arbitrary<unknown> = fc.oneof(
  fc.jsonValue({ maxDepth: 3 }),
  text,
  fc.integer(),
  fc.double(),
  fc.constantFrom(-1, 0, 1, 1e308, 2 ** 53, -0, 65, 4096, 100_000),
  fc.boolean(),
  fc.constant(null),
);

const maybe = <T>(a: fc.Arbitrary<T>) => fc.option(a, { nil: undefined, freq: 2 });
/** A required field: nearly always valid. */
const needed = <T>(valid: fc.Arbitrary<T>, fuzz: fc.Arbitrary<unknown> = anyValue) =>
  fc.oneof(
    { weight: 14, arbitrary: valid as fc.Arbitrary<unknown> },
    { weight: 1, arbitrary: fc.constant(undefined) },
    { weight: 1, arbitrary: fuzz },
  );
/** Left out seven times in eight. */
const rarely = <T>(a: fc.Arbitrary<T>) =>
  fc.oneof({ weight: 7, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: a });
/** Mostly a value the route accepts (or the field left out), sometimes anything. */
const field = <T>(valid: fc.Arbitrary<T>, fuzz: fc.Arbitrary<unknown> = anyValue) =>
  fc.oneof(
    { weight: 10, arbitrary: valid as fc.Arbitrary<unknown> },
    { weight: 3, arbitrary: fc.constant(undefined) },
    { weight: 1, arbitrary: fuzz },
  );
const defined = (o: Record<string, unknown>) =>
  Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined));

const invoke = fc
  .record({
    input: needed(
      fc.oneof(
        fc.constant('The Eiffel Tower is in'),
        fc.array(fc.integer({ min: 0, max: 50_256 }), { minLength: 1, maxLength: 6 }),
      ),
      fc.oneof(
        text,
        fc.array(fc.oneof(fc.integer({ min: -5, max: 60_000 }), fc.double(), text), { maxLength: 6 }),
        anyValue,
      ),
    ),
    block: field(
      fc.constant(VALID_BLOCK),
      fc.oneof(
        fc.constant('async (m) => { return m.; }'),
        fc.constant('1 + 1'),
        fc.constant('(m) => m'),
        text,
        anyValue,
      ),
    ),
    extra: rarely(anyValue),
  })
  .map(defined);

const submitBody = fc
  .record({
    requestId: field(
      fc.oneof(fc.stringMatching(/^[a-z][a-z0-9-]{0,8}$/), fc.constantFrom('seed-1', 'seed-2', 'r-01')),
      fc.oneof(id, anyValue),
    ),
    model: needed(fc.constant('gpt2-tiny'), fc.oneof(fc.constantFrom('gpt2-tiny ', 'other'), id, anyValue)),
    invokes: fc.oneof(
      { weight: 8, arbitrary: fc.array(invoke, { minLength: 1, maxLength: 3 }) },
      { weight: 1, arbitrary: fc.constant(Array.from({ length: 65 }, () => ({ input: 'x' }))) },
      { weight: 1, arbitrary: fc.option(anyValue, { nil: undefined }) },
    ),
    block: field(fc.constant(VALID_BLOCK), fc.oneof(text, anyValue)),
    newTokens: field(fc.integer({ min: 0, max: 4 }), fc.oneof(fc.constant(4096), anyValue)),
    timeoutMs: field(fc.integer({ min: 1, max: 600_000 })),
    queueTimeoutMs: field(fc.integer({ min: 1, max: 600_000 })),
    untrusted: field(fc.boolean()),
    blocking: field(fc.boolean()),
    unknownField: rarely(anyValue),
  })
  .map(defined);

const deployBody = fc
  .record({
    model: needed(fc.constant('gpt2-tiny'), fc.oneof(fc.constant('other'), id, anyValue)),
    replicas: field(fc.integer({ min: 1, max: 3 }), fc.oneof(fc.constantFrom(0, 17), anyValue)),
    gpus: field(fc.integer({ min: 1, max: 2 })),
    sizeBytes: field(fc.integer({ min: 1, max: 2 ** 34 })),
    paddingFactor: field(fc.double({ min: 0, max: 10, noNaN: true })),
    biasBytes: field(fc.integer({ min: 0, max: 2 ** 30 })),
    dtype: field(fc.constantFrom('float32', 'float16')),
    timeoutMs: field(fc.oneof(fc.integer({ min: 1, max: 600_000 }), fc.constant(null))),
    concurrency: field(fc.integer({ min: 1, max: 64 })),
    minDeploymentMs: field(fc.integer({ min: 0, max: 3_600_000 })),
    pinned: field(fc.boolean()),
    force: field(fc.boolean()),
    autoscale: field(
      fc
        .record({
          enabled: maybe(fc.boolean()),
          thresholdMs: maybe(fc.integer({ min: 1, max: 60_000 })),
          maxReplicas: maybe(fc.integer({ min: 1, max: 64 })),
          backoffMs: maybe(fc.integer({ min: 0, max: 60_000 })),
        })
        .map(defined),
    ),
  })
  .map(defined);

const scaleBody = fc
  .record({
    model: field(fc.constantFrom('gpt2-tiny', 'other')),
    replicas: field(fc.integer({ min: 0, max: 64 }), fc.oneof(fc.constant(65), anyValue)),
  })
  .map(defined);
const evictBody = fc.oneof(
  fc.record({ model: fc.oneof(fc.constantFrom('gpt2-tiny', 'other'), anyValue) }),
  fc.record({ replica: fc.oneof(fc.constantFrom('gpt2-tiny#1', 'gpt2-tiny#9'), anyValue) }),
  fc.record({ all: anyValue }),
  fc.record({ model: anyValue, replica: anyValue, all: maybe(anyValue) }).map(defined),
);
const pinBody = fc.record({ model: field(fc.constant('gpt2-tiny')), pinned: field(fc.boolean()) }).map(defined);
const keyBody = fc
  .record({
    label: field(fc.stringMatching(/^[a-z ]{1,20}$/), fc.oneof(text, anyValue, fc.constant('x'.repeat(201)))),
    trusted: field(fc.boolean()),
    priority: field(fc.boolean()),
    operator: field(fc.constant(false)),
    extra: rarely(anyValue),
  })
  .map(defined);
const emptyBody = fc.oneof(fc.constant({}), fc.constant(undefined), anyValue);

interface Route {
  method: 'GET' | 'POST';
  path: string;
  body?: fc.Arbitrary<unknown>;
  query?: readonly string[];
}

export const ROUTES: readonly Route[] = [
  { method: 'GET', path: '/ping' },
  { method: 'GET', path: '/version' },
  { method: 'GET', path: '/ready' },
  { method: 'GET', path: '/whoami' },
  { method: 'POST', path: '/requests', body: submitBody },
  { method: 'POST', path: '/requests/:id/cancel', body: emptyBody },
  { method: 'POST', path: '/deployments', body: deployBody },
  { method: 'POST', path: '/deployments/scale', body: scaleBody },
  { method: 'POST', path: '/deployments/evict', body: evictBody },
  { method: 'POST', path: '/deployments/pin', body: pinBody },
  { method: 'POST', path: '/agents/:id/drain', body: emptyBody },
  { method: 'POST', path: '/keys', body: keyBody },
  { method: 'GET', path: '/keys' },
  { method: 'POST', path: '/keys/:id/revoke', body: emptyBody },
  { method: 'GET', path: '/requests/:id' },
  { method: 'GET', path: '/requests/:id/result', query: ['token'] },
  { method: 'GET', path: '/requests', query: ['limit', 'status'] },
  { method: 'GET', path: '/cluster' },
  { method: 'GET', path: '/queue', query: ['model', 'limit'] },
  { method: 'GET', path: '/models' },
  { method: 'GET', path: '/models/:key/manifest', query: ['batch', 'sequence'] },
  { method: 'GET', path: '/models/:key/tokenizer' },
  { method: 'GET', path: '/live' },
  { method: 'GET', path: '/agents' },
  { method: 'GET', path: '/' },
  { method: 'GET', path: '/ws', query: ['key', 'protocol'] },
  {
    method: 'GET',
    path: '/audit',
    query: [
      'actor',
      'modelKey',
      'correlationId',
      'causationId',
      'type',
      'streamPrefix',
      'fromAt',
      'toAt',
      'afterPosition',
      'limit',
      'format',
      'data',
      'requestId',
    ],
  },
  { method: 'GET', path: '/why/:id', query: ['kind', 'depth', 'effects', 'positions', 'format'] },
  { method: 'GET', path: '/replay', query: ['to', 'from', 'queue', 'format'] },
];

const queryValue = fc.oneof(
  fc.constantFrom(
    '1',
    '0',
    '-1',
    '500',
    '501',
    '1000',
    '1e3',
    'abc',
    '',
    'QUEUED',
    'COMPLETED',
    'nope',
    'text',
    'json',
    'true',
    'false',
    'gpt2-tiny',
    '2025-03-01T10:00:00.000Z',
    'key:x',
    'request',
    'replica',
  ),
  text,
  fc.integer().map(String),
);

function query(route: Route): fc.Arbitrary<string> {
  const known = route.query ?? [];
  const name =
    known.length > 0
      ? fc.oneof({ weight: 4, arbitrary: fc.constantFrom(...known) }, { weight: 1, arbitrary: text })
      : text;
  return fc.oneof(
    { weight: 3, arbitrary: fc.constant('') },
    {
      weight: 5,
      arbitrary: fc
        .array(fc.tuple(name, queryValue), { maxLength: 4 })
        .map((kv) => (kv.length === 0 ? '' : `?${new URLSearchParams(kv).toString()}`)),
    },
    {
      weight: 1,
      arbitrary: fc.constantFrom(
        '?',
        '?&&',
        '?=1',
        '?a=%zz',
        '?limit=1&limit=2',
        '?%00=1',
        `?token=${'t'.repeat(400)}`,
      ),
    },
  );
}

function auth(keys: Keys): fc.Arbitrary<Record<string, string>> {
  const forged = `ndif_${'0'.repeat(16)}_${'A'.repeat(43)}`;
  const wrongSecret = `${keys.operator.slice(0, 22)}${'B'.repeat(43)}`;
  return fc.oneof(
    { weight: 6, arbitrary: fc.constant({ authorization: `Bearer ${keys.operator}` }) },
    { weight: 2, arbitrary: fc.constant({ authorization: `Bearer ${keys.user}` }) },
    { weight: 1, arbitrary: fc.constant({ 'x-api-key': keys.operator }) },
    { weight: 1, arbitrary: fc.constant({}) },
    {
      weight: 2,
      arbitrary: fc.oneof(
        fc.constant({ authorization: `Bearer ${forged}` }),
        fc.constant({ authorization: `Bearer ${wrongSecret}` }),
        fc.constant({ authorization: `Basic ${Buffer.from('a:b').toString('base64')}` }),
        fc.constant({ authorization: `Bearer ${keys.operator}`, 'x-api-key': keys.user }),
        fc.constant({ authorization: 'Bearer' }),
        fc.string({ maxLength: 60 }).map((s) => ({ authorization: `Bearer ${s}` })),
        fc.string({ maxLength: 60 }).map((s) => ({ 'x-api-key': s })),
      ),
    },
  );
}

const headerValue = fc.string({ maxLength: 40 }).map((s) => s.replace(/[^\x20-\x7e]/g, '').trim());

const extraHeaders: fc.Arbitrary<Record<string, string>> = fc
  .record({
    'x-ndif-protocol': field(
      fc.constantFrom('1.0', '1.9'),
      fc.oneof(fc.constantFrom('2.0', '0.1', '1', '1.0.0', 'v1', '', '01.00', '99999999999999999999.0'), headerValue),
    ),
    'content-type': field(
      fc.constantFrom('application/json', 'application/json; charset=utf-8'),
      fc.constantFrom(
        'text/plain',
        'application/x-www-form-urlencoded',
        'multipart/form-data; boundary=x',
        'application/json; charset=latin1',
        'application/vnd.api+json',
        '',
      ),
    ),
    'idempotency-key': rarely(
      fc.oneof(fc.stringMatching(/^[A-Za-z0-9._:-]{1,20}$/), headerValue, fc.constant('k'.repeat(129))),
    ),
    'x-fuzz': rarely(headerValue),
    accept: rarely(fc.constantFrom('application/json', 'text/html', '*/*', 'text/plain', '')),
  })
  .map((h) => defined(h) as Record<string, string>);

function bodyText(route: Route): fc.Arbitrary<string | undefined> {
  const shaped = route.body ?? emptyBody;
  return fc.oneof(
    { weight: 8, arbitrary: shaped.map((b) => (b === undefined ? undefined : JSON.stringify(b))) },
    { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 4 }).map((v) => JSON.stringify(v)) },
    {
      weight: 1,
      arbitrary: fc.oneof(
        text,
        fc.constantFrom(
          '{',
          '{"model":',
          '[1,2',
          'nul',
          '{"a":1}{"b":2}',
          '\uFEFF{}',
          '{"__proto__":{"x":1}}',
          '{"constructor":{"prototype":{}}}',
        ),
      ),
    },
    {
      weight: 1,
      arbitrary: fc.constant(JSON.stringify({ model: 'gpt2-tiny', invokes: [{ input: 'x'.repeat(70 * 1024) }] })),
    },
    { weight: 1, arbitrary: fc.constant(`${'['.repeat(5000)}${']'.repeat(5000)}`) },
  );
}

const METHODS = ['GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'HEAD', 'OPTIONS'] as const;

export function httpCase(keys: Keys): fc.Arbitrary<HttpCase> {
  return fc.constantFrom(...ROUTES).chain((route) =>
    fc
      .record({
        method: fc.oneof(
          { weight: 9, arbitrary: fc.constant(route.method) },
          { weight: 1, arbitrary: fc.constantFrom(...METHODS) },
        ),
        segments: fc.array(segment, { minLength: 2, maxLength: 2 }),
        query: query(route),
        auth: auth(keys),
        extra: extraHeaders,
        body: bodyText(route),
        junkPath: fc.oneof(
          { weight: 12, arbitrary: fc.constant('') },
          { weight: 1, arbitrary: fc.constantFrom('/', '//', '/x', '/..', '%2F', '/%zz') },
        ),
      })
      .map(({ method, segments, query: q, auth: a, extra, body, junkPath }) => {
        let i = 0;
        const path = route.path.replace(/:[a-z]+/g, () => segments[i++]!) + junkPath;
        const headers: Record<string, string> = { ...a, ...extra };
        if (body !== undefined && headers['content-type'] === undefined && method !== 'GET' && method !== 'HEAD')
          headers['content-type'] = 'application/json';
        return {
          method,
          url: path + q,
          headers,
          body: method === 'GET' || method === 'HEAD' ? undefined : body,
          route: `${route.method} ${route.path}`,
        };
      }),
  );
}
