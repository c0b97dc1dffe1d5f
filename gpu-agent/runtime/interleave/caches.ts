// Caches (`ctx.cache(...)`): an invoke registers points of a step before the pass reaches them; their tensors become
// extra outputs of the segments that compute them and are captured — the invoke's rows, once its own swaps and skips
// of the point are applied — before the table drops them. A WAIT for `@cache:<id>` is answered with every point's
// tensors in forward order, where the pass serves the last point (at once, if the pass is past it).
import type { HostToBlock, TensorPayload } from '../../../protocol/interleave.js';
import { cacheAddr } from '../../../protocol/extra-addrs.js';
import { unknownModuleMessage } from '../../../protocol/module-paths.js';
import type { ObservationPoint } from '../graph/addresses.js';
import { type BlockErrorType, InterventionError, blockError } from '../errors.js';
import type { Mediator } from './mediator.js';
import type { PassView } from './pass-view.js';

/** A cache an invoke asked for: its points at `step`, and what has been captured of them (by rank). */
export interface HostCache {
  id: number;
  step: number;
  points: ObservationPoint[];
  got: Map<number, TensorPayload[]>;
  /** Points that were not computed for this invoke (inside a skipped module), with why. */
  missing: Map<number, string>;
}

export class Caches {
  constructor(
    private readonly view: PassView,
    private readonly send: (msg: HostToBlock) => void,
  ) {}

  /** CACHE: records the points at `step` (registered before the pass reaches any of them). */
  register(inv: Mediator, id: number, step: number, keys: string[]): void {
    const v = this.view;
    const { addresses, graph } = v.ctx;
    const fail = (type: BlockErrorType, message: string) =>
      new InterventionError(blockError(type, `cache ${id}: ${message}`), inv.index);
    if (inv.caches.has(id)) throw fail('ProtocolError', 'sent twice');
    if (!Number.isInteger(step) || step >= v.steps)
      throw fail(
        'NotProvided',
        `step ${step} does not exist: the request runs ${v.steps} step${v.steps === 1 ? '' : 's'} (numbered from 0)`,
      );
    if (keys.length === 0) throw fail('CacheError', 'no points to record');
    const points: ObservationPoint[] = [];
    for (const key of new Set(keys)) {
      const p = addresses.byKey.get(key);
      if (!p) {
        const at = key.lastIndexOf('.');
        const path = at < 0 ? '' : key.slice(0, at);
        throw fail(
          graph.modules.has(path) ? 'NotObservable' : 'UnknownModule',
          graph.modules.has(path)
            ? `${key}: ${addresses.unobservable.get(key) ?? 'not observable'}`
            : unknownModuleMessage(path, [...graph.modules.keys()]),
        );
      }
      points.push(p);
    }
    points.sort((a, b) => a.rank - b.rank);
    if (v.finished || v.before(step, points[0]!.rank)) {
      throw fail(
        'OutOfOrder',
        `it starts at ${v.addrOf(points[0]!, step)}, but the forward pass had already reached ${v.finished ? 'its end' : v.here()}; start a cache before the pass reaches its first module`,
      );
    }
    inv.caches.set(id, { id, step, points, got: new Map(), missing: new Map() });
    if (step === v.step && v.pass) this.capture(v.pass.pos);
  }

  /** WAIT for `@cache:<id>`: answered now when the pass is at or past its last point, else where it serves it. */
  wait(inv: Mediator, addr: string, id: number): void {
    const v = this.view;
    const c = inv.caches.get(id);
    if (!c) {
      this.send({
        kind: 'RAISE',
        invoke: inv.index,
        addr,
        error: blockError('ProtocolError', `${addr}: no such cache (its CACHE message must come first)`, 'protocol'),
      });
      return;
    }
    const last = c.points[c.points.length - 1]!;
    if (
      c.got.size + c.missing.size === c.points.length ||
      v.finished ||
      v.before(c.step, last.rank) ||
      (c.step === v.step && last.rank === v.rank)
    ) {
      this.answer(inv, id);
      return;
    }
    inv.park({ kind: 'cache', step: c.step, point: last, id, addr });
  }

  /** Sends what cache `id` recorded (every point's tensors, forward order), or why some point has no value. */
  answer(inv: Mediator, id: number): void {
    const v = this.view;
    const c = inv.caches.get(id)!;
    inv.caches.delete(id);
    const addr = cacheAddr(id);
    const lost = c.points.filter((p) => !c.got.has(p.rank));
    if (lost.length > 0) {
      const why = lost.map(
        (p) => `${v.addrOf(p, c.step)} (${c.missing.get(p.rank) ?? 'the forward pass did not reach it'})`,
      );
      this.send({
        kind: 'RAISE',
        invoke: inv.index,
        addr,
        error: blockError(
          'NotProvided',
          `the cache has no value for ${why.slice(0, 3).join(', ')}${why.length > 3 ? ` and ${why.length - 3} more` : ''}`,
        ),
      });
      return;
    }
    this.send({ kind: 'VALUE', invoke: inv.index, addr, values: c.points.flatMap((p) => c.got.get(p.rank)!) });
  }

  /** Tensors of cached points of this step not captured yet that nodes [start, end) produce: extra segment outputs. */
  tensorsIn(start: number, end: number): string[] {
    const v = this.view;
    const out = new Set<string>();
    for (const inv of v.mediators) {
      for (const c of inv.caches.values()) {
        if (c.step !== v.step) continue;
        for (const p of c.points) {
          if (c.got.has(p.rank) || c.missing.has(p.rank)) continue;
          for (const t of p.tensors) {
            const k = v.ctx.graph.producer.get(t);
            if (k !== undefined && k >= start && k < end) out.add(t);
          }
        }
      }
    }
    return [...out];
  }

  /**
   * Captures the cached points of this step whose cut is at most `cut` (and, when given, whose rank is at most `rank`):
   * each invoke's own rows, once its own swaps and skips of the point are applied (a point it swaps or skips ahead is
   * captured when it is served). A point whose tensors were not computed (inside a module every invoke skipped, or
   * this invoke skipped) has no value.
   */
  capture(cut: number, rank?: number): void {
    const v = this.view;
    const pass = v.pass!;
    for (const inv of v.mediators) {
      for (const c of inv.caches.values()) {
        if (c.step !== v.step) continue;
        for (const p of c.points) {
          if (p.cut > cut || (rank !== undefined && p.rank > rank) || c.got.has(p.rank) || c.missing.has(p.rank))
            continue;
          if (
            rank === undefined &&
            (inv.swaps.has(v.step, p.key) || (p.point === 'output' && inv.skips.has(v.step, p.path)))
          )
            continue;
          const skipped = v.skippedFor(inv, p);
          if (skipped) {
            c.missing.set(
              p.rank,
              `it is inside ${skipped}, which ${v.skippedByAll().some((m) => m.path === skipped) ? 'every invoke' : 'this invoke'} skipped`,
            );
            continue;
          }
          if (p.tensors.some((t) => !pass.table.has(v.aliasFor(t, p) ?? t))) continue;
          c.got.set(p.rank, v.valuesFor(inv, p));
        }
      }
    }
  }
}
