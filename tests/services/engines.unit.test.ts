// The Node versions the fabric supports (package.json engines) install cleanly: every package in the lock file
// accepts the oldest release of each supported line and the Node running this test, so `npm ci` prints no
// EBADENGINE warning on any of them (cookie@2, which fastify's light-my-request pulls in, asks for Node 22).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { it } from 'node:test';
import semver from 'semver';

const root = new URL('../../../', import.meta.url);
const pkg = JSON.parse(readFileSync(new URL('package.json', root), 'utf8')) as { engines: { node: string } };
const lock = JSON.parse(readFileSync(new URL('package-lock.json', root), 'utf8')) as {
  packages: Record<string, { engines?: { node?: string } | string[] }>;
};

/** The oldest version each alternative of the engines range admits (20.19.0, 22.12.0, 24.0.0). */
function lineMinimums(range: string): string[] {
  return new semver.Range(range).set.map(
    (comparators) => semver.minVersion(comparators.map((c) => c.value).join(' '))!.version,
  );
}

it('admits Node 20.19+, 22.12+ and 24+', () => {
  assert.deepEqual(lineMinimums(pkg.engines.node), ['20.19.0', '22.12.0', '24.0.0']);
  assert.ok(semver.satisfies('26.0.0', pkg.engines.node), 'Node 26 (LTS since October 2026) is admitted');
  assert.ok(
    semver.satisfies(process.version, pkg.engines.node),
    `this Node (${process.version}) is outside ${pkg.engines.node}`,
  );
});

it('every locked package accepts each supported line and this Node', () => {
  const versions = [...lineMinimums(pkg.engines.node), '26.0.0', semver.clean(process.version)!];
  const refusals: string[] = [];
  for (const [path, p] of Object.entries(lock.packages)) {
    const range = !Array.isArray(p.engines) ? p.engines?.node : undefined;
    if (path === '' || range === undefined) continue;
    for (const v of versions) if (!semver.satisfies(v, range)) refusals.push(`${path} wants node ${range}, not ${v}`);
  }
  assert.deepEqual(refusals, []);
});
