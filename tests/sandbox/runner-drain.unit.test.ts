// The drain marker on a runner's pipes: removed from the text wherever the pipe's chunks split it, reported in
// order with the text around it, and text that only looks like its start is passed on.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DRAIN_MARKER, DrainMarkerScanner } from '../../sandbox/runner-drain.js';

function scan(chunks: string[]): string[] {
  const seen: string[] = [];
  const s = new DrainMarkerScanner(
    (t) => seen.push(t),
    () => seen.push('<drained>'),
  );
  for (const c of chunks) s.write(c);
  s.end();
  // Adjacent text pieces are one stream; join them so only the marker boundaries matter.
  return seen.reduce<string[]>((acc, x) => {
    if (x !== '<drained>' && acc.length > 0 && acc[acc.length - 1] !== '<drained>') acc[acc.length - 1] += x;
    else acc.push(x);
    return acc;
  }, []);
}

test('the marker is found and removed at every split of the pipe text', () => {
  const text = `line one\npartial${DRAIN_MARKER}after\n`;
  for (let i = 0; i <= text.length; i++) {
    for (let j = i; j <= text.length; j++) {
      assert.deepEqual(
        scan([text.slice(0, i), text.slice(i, j), text.slice(j)]),
        ['line one\npartial', '<drained>', 'after\n'],
        `split at ${i}, ${j}`,
      );
    }
  }
});

test('a marker at the very start or end, two markers, and marker look-alikes', () => {
  assert.deepEqual(scan([DRAIN_MARKER]), ['<drained>']);
  assert.deepEqual(scan([`a${DRAIN_MARKER}${DRAIN_MARKER}b`]), ['a', '<drained>', '<drained>', 'b']);
  const almost = DRAIN_MARKER.slice(0, -1);
  assert.deepEqual(scan([`x${almost}`]), [`x${almost}`], 'held back, then passed on at the end');
  assert.deepEqual(scan([`x${almost}`, 'y\n']), [`x${almost}y\n`]);
  assert.deepEqual(scan(['\u0000\u0000', 'z']), ['\u0000\u0000z']);
});
