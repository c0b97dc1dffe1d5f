// Fair share inside a rank: instead of one FIFO for everyone, submitters take turns (start-time fair queuing with
// unit cost). Each queue rank has a clock, the round of the request it dispatched last. A request gets the round
// after its submitter's last queued request in that rank, and never one below the clock:
//
//   round = max(clock, last + 1)        (last: the round of the submitter's latest queued request in the rank)
//
// A submitter with nothing queued joins at the clock: it goes right after the requests of the round being served,
// so one key's 150 queued requests delay another key's next request by at most about one run. Within a round the
// order is by enqueue time. Positions read from this order are what dispatch will do.

/** The round of a request entering a rank. */
export function fairRound(clock: number, lastQueuedRound: number | undefined): number {
  return lastQueuedRound === undefined ? clock : Math.max(clock, lastQueuedRound + 1);
}

/** Whether a rank is fair-shared (fresh requests); requeued ranks keep FIFO by original enqueue time. */
export const isFairRank = (rank: number): boolean => rank === 1 || rank === 3;
