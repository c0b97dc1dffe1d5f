// RequestStarted is reported a moment after a run starts: a run that ends first is reported started with its
// completion; anything else reported before the moment sends the start first; it is sent once.
import assert from 'node:assert/strict';
import { mock, test } from 'node:test';
import { StartedReport } from '../../gpu-agent/agent/started-report.js';

test('a run that ends within the delay carries its start with the completion; nothing is sent', (t) => {
  t.mock.timers.enable({ apis: ['setTimeout'] });
  const send = mock.fn();
  const s = new StartedReport(send, 5);
  s.runStarted();
  t.mock.timers.tick(4);
  assert.equal(s.takeForCompletion(), true);
  t.mock.timers.tick(100);
  assert.equal(send.mock.callCount(), 0, 'the timer was cleared');
  assert.equal(s.takeForCompletion(), false, 'once');
});

test('a longer run is reported started after the delay, once, and its completion does not repeat it', (t) => {
  t.mock.timers.enable({ apis: ['setTimeout'] });
  const send = mock.fn();
  const s = new StartedReport(send, 5);
  assert.equal(s.takeForCompletion(), false, 'not started: nothing to carry');
  s.runStarted();
  s.runStarted();
  t.mock.timers.tick(5);
  assert.equal(send.mock.callCount(), 1);
  s.flush();
  assert.equal(s.takeForCompletion(), false);
  assert.equal(send.mock.callCount(), 1);
});

test('another report before the delay sends the start first; a cancelled attempt sends nothing', (t) => {
  t.mock.timers.enable({ apis: ['setTimeout'] });
  const send = mock.fn();
  const s = new StartedReport(send, 5);
  s.runStarted();
  s.flush();
  assert.equal(send.mock.callCount(), 1);
  t.mock.timers.tick(10);
  assert.equal(send.mock.callCount(), 1);
  const cancelled = mock.fn();
  const c = new StartedReport(cancelled, 5);
  c.runStarted();
  c.cancel();
  t.mock.timers.tick(10);
  c.flush();
  assert.equal(cancelled.mock.callCount(), 0);
  const immediate = mock.fn();
  new StartedReport(immediate, 0).runStarted();
  assert.equal(immediate.mock.callCount(), 1, 'a delay of 0 reports at once');
});
