// Which test file starts next (scripts/test-schedule.mjs): files start while their loads fit the capacity, a file
// that fits passes a head that does not for a while only, and a file using PostgreSQL or Kafka weighs more.
import { test } from 'node:test';
import assert from 'node:assert/strict';

const root = new URL('../../../', import.meta.url);
interface Item {
  file: string;
  wall: number;
  load: number;
}
interface Schedule {
  planFiles(
    files: string[],
    table: Record<string, { wall: number; cpu: number }>,
    sourceOf: (f: string) => string,
    usesServers?: (f: string) => boolean,
  ): Item[];
  SERVICE_LOAD: number;
  pickNext(
    queue: Item[],
    running: Array<{ load: number }>,
    o: { capacity: number; maxFiles: number; headWaitedMs?: number; maxPassMs?: number },
  ): number;
}
const schedule = (await import(new URL('scripts/test-schedule.mjs', root).href)) as Schedule;
const item = (file: string, load: number): Item => ({ file, wall: 1, load });

test('planFiles orders known files longest first, new ones after them in their order, with load as CPU per wall second', () => {
  const table = {
    'a.ts': { wall: 10, cpu: 9 },
    'b.ts': { wall: 40, cpu: 10 },
    'c.ts': { wall: 5, cpu: 100 },
    'd.ts': { wall: 5, cpu: 0 },
  };
  const plan = schedule.planFiles(['new1.js', 'a.js', 'b.js', 'new2.js', 'c.js', 'd.js'], table, (f) =>
    f.replace(/\.js$/, '.ts'),
  );
  assert.deepEqual(
    plan.map((p) => p.file),
    ['b.js', 'a.js', 'c.js', 'd.js', 'new1.js', 'new2.js'],
  );
  assert.deepEqual(
    plan.map((p) => p.load),
    [0.25, 0.9, 1.5, 0.1, 1, 1],
    'bounded to 0.1..1.5; a file the table lacks counts as one core',
  );
});

test('planFiles adds SERVICE_LOAD to a file using PostgreSQL or Kafka', () => {
  const table = { 'a.ts': { wall: 10, cpu: 5 }, 'b.ts': { wall: 8, cpu: 4 } };
  const plan = schedule.planFiles(
    ['a.js', 'b.js'],
    table,
    (f) => f.replace(/\.js$/, '.ts'),
    (f) => f === 'a.js',
  );
  assert.equal(schedule.SERVICE_LOAD, 0.3);
  assert.deepEqual(
    plan.map((p) => [p.file, p.load]),
    [
      ['a.js', 0.8],
      ['b.js', 0.5],
    ],
  );
});

test('pickNext starts the head when it fits and anything when nothing runs', () => {
  const o = { capacity: 2.5, maxFiles: 8 };
  assert.equal(schedule.pickNext([], [], o), -1, 'nothing to start');
  assert.equal(schedule.pickNext([item('huge', 1.5)], [], { capacity: 1, maxFiles: 8 }), 0, 'alone, whatever its load');
  assert.equal(schedule.pickNext([item('h', 1)], [{ load: 1 }], o), 0);
  assert.equal(schedule.pickNext([item('h', 1)], [{ load: 1 }, { load: 1 }], o), -1, 'the head does not fit');
});

test('pickNext lets a file that fits pass a head that does not, until the head has waited maxPassMs', () => {
  const o = { capacity: 2.5, maxFiles: 8 };
  const queue = [item('heavy', 1), item('heavy2', 1), item('light', 0.2)];
  const running = [{ load: 1 }, { load: 0.6 }];
  assert.equal(schedule.pickNext(queue, [{ load: 1 }, { load: 0.4 }], o), 0, '1.4 + 1 fits: the head starts');
  assert.equal(schedule.pickNext(queue, running, o), 2, '1.6 + 1 fits neither the head nor the next, 1.6 + 0.2 does');
  assert.equal(schedule.pickNext(queue, running, { ...o, headWaitedMs: 19_999 }), 2);
  assert.equal(schedule.pickNext(queue, running, { ...o, headWaitedMs: 20_000 }), -1, 'the head waited long enough');
  assert.equal(schedule.pickNext(queue, running, { ...o, headWaitedMs: 5_000, maxPassMs: 5_000 }), -1);
  assert.equal(schedule.pickNext(queue, [{ load: 1 }, { load: 1 }, { load: 0.4 }], o), -1, 'nothing fits');
});

test('pickNext starts nothing past maxFiles', () => {
  assert.equal(schedule.pickNext([item('x', 0.1)], [{ load: 0.1 }, { load: 0.1 }], { capacity: 8, maxFiles: 2 }), -1);
  assert.equal(schedule.pickNext([item('x', 0.1)], [{ load: 0.1 }], { capacity: 8, maxFiles: 2 }), 0);
});
