import { test } from 'node:test';
import assert from 'node:assert/strict';
import { familyNames, mergeExposition } from '../../metrics/merge-text.js';

const own =
  '# HELP a_total A\n# TYPE a_total counter\na_total 1\n# HELP process_cpu_seconds_total cpu\n# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 5\n';
const agent =
  '# HELP process_cpu_seconds_total cpu\n# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 9\n\n# HELP b gauge b\n# TYPE b gauge\nb{gpu="0"} 2\nb{gpu="1"} 3\n# HELP h hist\n# TYPE h histogram\nh_bucket{le="1"} 1\nh_sum 0.5\nh_count 1\n';

test("adds the other process's families this one lacks, each once, with HELP, TYPE and samples", () => {
  const merged = mergeExposition(own, agent);
  assert.deepEqual([...familyNames(merged)], ['a_total', 'process_cpu_seconds_total', 'b', 'h']);
  assert.ok(merged.startsWith(own));
  assert.ok(merged.includes('b{gpu="1"} 3\n') && merged.includes('h_count 1\n'));
  assert.ok(!merged.includes('process_cpu_seconds_total 9'), "a shared family stays this process's own");
  assert.equal(mergeExposition(own, ''), own);
  assert.equal(mergeExposition(own, own), own);
});
