// Integration tests need real services; scripts/test.mjs starts them and passes their variables.
// Without one a test fails loudly, unless the developer opts out with the named skip variable.
import { test } from 'node:test';
import assert from 'node:assert/strict';

/**
 * Returns the variable's value, or undefined after registering one failing test that says how to
 * get the service (or one skipped test when `skipVariable`=1).
 */
export function requireService(variable: string, skipVariable: string): string | undefined {
  const value = process.env[variable];
  if (value) return value;
  if (process.env[skipVariable] === '1') {
    test(`${variable} is not set`, { skip: `${skipVariable}=1: skipped without the service` }, () => {});
    return undefined;
  }
  test(`${variable} is set`, () => {
    assert.fail(
      `${variable} is not set. Run the tests through \`npm test\` or \`node scripts/test.mjs <filter>\`, which start the service, ` +
        `or set ${skipVariable}=1 to skip these tests on purpose.`,
    );
  });
  return undefined;
}
