// The held start report: a run that ends within the hold folds its start into its end; one that outlasts it, or
// reports anything else first, sends the start on its own, once; an aborted run drops it.
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { it } from 'node:test';
import { StartHold } from '../../gpu-agent/agent/start-hold.js';

function hold(holdMs: number) {
  let now = 1_000;
  const held: number[] = [];
  const h = new StartHold(
    holdMs,
    (ms) => held.push(ms),
    () => now,
  );
  return {
    h,
    sent: () => held.length,
    held,
    advance: (ms: number) => {
      now += ms;
    },
  };
}

it('a run that ends within the hold: the end carries how long ago it started, and no start is sent', async () => {
  const x = hold(50);
  assert.equal(x.h.fold(), undefined, 'nothing to fold before the run started');
  x.h.started();
  x.advance(7.4);
  x.h.started(); // a session's second trace: the first start counts
  x.advance(5);
  assert.equal(x.h.fold(), 12);
  await sleep(80);
  assert.equal(x.sent(), 0, 'the folded start is never sent on its own');
  assert.equal(x.h.fold(), undefined, 'folded once');
});

it('a run that outlasts the hold sends its start once, and its end carries none', async () => {
  const x = hold(20);
  x.h.started();
  assert.equal(x.sent(), 0);
  await sleep(60);
  assert.equal(x.sent(), 1);
  x.h.flush();
  assert.equal(x.h.fold(), undefined);
  assert.equal(x.sent(), 1);
});

it('another report first (a log batch): the start goes before it, at once, saying how long it was held', async () => {
  const x = hold(10_000);
  x.h.flush();
  assert.equal(x.sent(), 0, 'no start to send before the run started');
  x.h.started();
  x.advance(3.6);
  x.h.flush();
  assert.deepEqual(x.held, [4]);
  assert.equal(x.h.fold(), undefined);
});

it('a hold of 0 sends the start as the run starts', () => {
  const x = hold(0);
  x.h.started();
  assert.deepEqual(x.held, [0]);
  assert.equal(x.h.fold(), undefined);
});

it('an aborted run drops its held start: nothing is sent later', async () => {
  const x = hold(20);
  x.h.started();
  x.h.drop();
  await sleep(60);
  assert.equal(x.sent(), 0);
  x.h.started();
  assert.equal(x.sent(), 0, 'a dropped hold does not start again');
});
