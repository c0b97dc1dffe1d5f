// What one pass cost, as a result reports it: the pass's own counters, and the segments compiled meanwhile.
import type { SegmentCacheStats } from '../segments/segment-cache.js';
import type { Interleaver } from './interleaver.js';
import type { RunTimings } from './request-types.js';

/** `before` and `after`: the segment cache's stats around the pass (what it compiled is their difference). */
export function passTimings(
  run: Interleaver,
  totalMs: number,
  before: SegmentCacheStats,
  after: SegmentCacheStats,
): RunTimings {
  return {
    totalMs,
    forwardMs: run.timings.forwardMs,
    compileMs: after.compileMs - before.compileMs,
    segmentRuns: run.timings.segmentRuns,
    segmentsCompiled: after.compiled - before.compiled,
    blockMs: run.blockMs,
    backwardMs: run.backward.backwardMs,
    backwardRuns: run.backward.backwardRuns,
    callMs: run.calls.callMs,
    calls: run.calls.calls,
  };
}
