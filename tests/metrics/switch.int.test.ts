// NDIF_METRICS: on by default, `off` leaves /metrics out, anything else is refused; /metrics needs no key (as
// Prometheus scrapes) while the API's other reads do.
import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import { buildFabricServer } from '../../fabric/embedded/http-server.js';
import { FabricMetrics } from '../../metrics/fabric-metrics.js';
import { metricsEnabledFromEnv } from '../../metrics/registry.js';
import { isFabricError } from '../../protocol/errors.js';
import { startApi, type ApiHarness } from '../command-api/harness.js';

let h: ApiHarness;
before(async () => {
  h = await startApi({ auth: true, config: { rateLimit: null } });
});
after(async () => {
  await h?.close();
});

it('reads NDIF_METRICS: on unless off, a typo refused with the choices', () => {
  assert.equal(metricsEnabledFromEnv({}), true);
  assert.equal(metricsEnabledFromEnv({ NDIF_METRICS: 'on' }), true);
  assert.equal(metricsEnabledFromEnv({ NDIF_METRICS: 'off' }), false);
  assert.throws(
    () => metricsEnabledFromEnv({ NDIF_METRICS: 'no' }),
    (e: unknown) =>
      isFabricError(e) &&
      e.code === 'FABRIC_CONFIG_INVALID' &&
      /NDIF_METRICS="no" is not valid: on or off/.test(e.message),
  );
});

it('serves no /metrics without metrics in the context', async () => {
  const r = await h.app.inject({ method: 'GET', url: '/metrics' });
  assert.equal(r.statusCode, 404);
  assert.equal(r.json().code, 'API_ROUTE_NOT_FOUND');
  const v = await h.app.inject({ method: 'GET', url: '/version' });
  assert.ok(!(v.json().capabilities as string[]).includes('metrics'));
});

it('serves /metrics without a key when auth is on, and times the calls it answers', async () => {
  const app = await buildFabricServer({
    ...h.ctx,
    keys: h.keyStore,
    metrics: new FabricMetrics(),
    config: { auth: true, rateLimit: null },
  });
  try {
    assert.equal((await app.inject({ method: 'GET', url: '/cluster' })).statusCode, 401);
    const r = await app.inject({ method: 'GET', url: '/metrics' });
    assert.equal(r.statusCode, 200);
    assert.match(r.headers['content-type'] as string, /^text\/plain; version=0\.0\.4/);
    assert.match(
      r.body,
      /^ndif_http_request_duration_seconds_count\{method="GET",route="\/cluster",status_code="401"\} 1$/m,
    );
    assert.ok(
      ((await app.inject({ method: 'GET', url: '/version' })).json().capabilities as string[]).includes('metrics'),
    );
  } finally {
    await app.close();
  }
});
