// Bounded hot state: the view keeps live requests and the `hot.recentFinished` most recently finished ones; older
// finished requests leave `byId` (their history stays in the log, where GET /requests/:id, `ndif why`, audit and
// replay read it, and in the read models). What the scheduler needs of them afterwards is kept compactly
// (`kept`: results not yet expired, for retention and storage quotas).

import type { RequestsState } from './state.js';

/** Evicts the oldest finished requests beyond the limit; calls `onEvicted` with each id. */
export function evictFinished(s: RequestsState, onEvicted?: (requestId: string) => void): void {
  const f = s.finished;
  while (f.ids.length - f.head > s.hot.recentFinished) {
    const id = f.ids[f.head]!;
    f.head++;
    const v = s.byId.get(id);
    if (v === undefined || v.finishedAtMs === null) continue;
    s.byId.delete(id);
    s.evicted++;
    onEvicted?.(id);
  }
  if (f.head > 1024 && f.head * 2 > f.ids.length) {
    f.ids = f.ids.slice(f.head);
    f.head = 0;
  }
}
