// Swaps and skips written into the pass's table: an invoke's rows of a point's tensors replaced (a module input other
// nodes also read is replaced in an alias only the module's nodes read), the outputs of a module every invoke skips
// assembled from each invoke's values, and the checks a value from a block passes first (payload, dtype, shape,
// finite) — in the invoke's rows, or the whole tensor when it has no batch dimension and the trace one invoke.
import type { TensorPayload } from '../../../protocol/interleave.js';
import { checkPayload, firstNonFinite, isFloatDtype, sameShape } from '../../../protocol/tensor-payload.js';
import { normalizePath, unknownModuleMessage } from '../../../protocol/module-paths.js';
import { pointKey } from '../../../protocol/manifest.js';
import type { ObservationPoint } from '../graph/addresses.js';
import type { ModuleNode } from '../graph/model-graph.js';
import { isWithin } from '../graph/scopes.js';
import type { OrtTensor } from '../ort/session.js';
import { payloadToOrt, replaceRows, writeRowsInPlace } from '../onnx/tensor-convert.js';
import { type BlockErrorType, InterventionError, blockError } from '../errors.js';
import { ALIAS_MARK } from './host-context.js';
import type { ForwardRun } from './host-context.js';
import type { Mediator } from './mediator.js';
import type { PassView } from './pass-view.js';

export class Edits {
  constructor(
    private readonly view: PassView,
    /** Whether the request generates with the KV cache. */
    private readonly cached: boolean,
    /** Padded prompt length (sequence at step 0). */
    private readonly width: number,
  ) {}

  private get pass(): ForwardRun {
    return this.view.pass!;
  }

  /** Checks a SKIP of `rawPath` at `step` and returns the module's path; throws what was wrong with it. */
  checkSkip(inv: Mediator, rawPath: string, step: number, values: TensorPayload[]): string {
    const v = this.view;
    const { graph, addresses } = v.ctx;
    const fail = (type: BlockErrorType, message: string) => new InterventionError(blockError(type, message), inv.index);
    const path = normalizePath(rawPath);
    const m = graph.modules.get(path);
    if (!m) throw fail('UnknownModule', unknownModuleMessage(path, [...graph.modules.keys()]));
    if (path === '' || m.isList || !m.contiguous || !addresses.byKey.has(pointKey(path, 'output'))) {
      const why =
        path === ''
          ? 'the model itself cannot be skipped'
          : m.isList
            ? `${path} is a list of modules; skip its members`
            : !m.contiguous
              ? `the nodes of ${path} are interleaved with other nodes, so it cannot be left out as one range`
              : `${path} has no output to replace`;
      throw fail('NotSkippable', why);
    }
    if (step < v.step || (step === v.step && v.pass && v.pass.pos > m.start)) {
      throw fail(
        'OutOfOrder',
        `skip of ${path} at step ${step} arrived after the forward pass had entered it (it is at ${v.here()})`,
      );
    }
    if (values.length !== m.outputs.length) {
      throw fail(
        'ShapeMismatch',
        `${path} has ${m.outputs.length} output tensor${m.outputs.length === 1 ? '' : 's'}; the skip gave ${values.length}`,
      );
    }
    if (this.cached && step < v.steps - 1 && this.holdsCache(m)) {
      throw fail(
        'NotSkippable',
        `${path} computes keys and values of the KV cache, which later steps read: with the cache it cannot be skipped before the last step (${v.steps - 1}); run the request with generation.cache false to skip it`,
      );
    }
    const seq = this.seqAt(step);
    m.outputs.forEach((name, j) => {
      const rows = v.ctx.batched(name) ? inv.rows : v.mediators.reduce((n, i) => n + i.rows, 0);
      const want = v.ctx.expected(name, rows, seq);
      this.checkValue(inv, `skip of ${path}`, values[j]!, want.dtype, want.shape);
    });
    if (!v.ctx.batched(m.outputs[0]!) && v.mediators.length > 1) {
      throw fail(
        'SharedTensor',
        `${path}'s output is shared by every invoke's rows (it has no batch dimension), so one invoke cannot skip it`,
      );
    }
    return path;
  }

  /** Sequence length of the module outputs at `step`. */
  private seqAt(step: number): number {
    return this.cached && step > 0 ? 1 : this.width + step;
  }

  /** The batch tensors of a module every invoke skips: each invoke's skip values in its rows. */
  skipOutputs(m: ModuleNode): Map<string, OrtTensor> {
    const v = this.view;
    const out = new Map<string, OrtTensor>();
    m.outputs.forEach((name, j) => {
      const parts = v.mediators.map((inv) => inv.skips.get(v.step, m.path)![j]!);
      if (!v.ctx.batched(name) || parts.length === 1) {
        out.set(name, payloadToOrt(parts[0]!));
        return;
      }
      const total = parts.reduce((n, p) => n + p.data.byteLength, 0);
      const data = new Uint8Array(total);
      let off = 0;
      for (const p of parts) {
        data.set(p.data, off);
        off += p.data.byteLength;
      }
      const rows = parts.reduce((n, p) => n + p.shape[0]!, 0);
      out.set(name, payloadToOrt({ dtype: parts[0]!.dtype, shape: [rows, ...parts[0]!.shape.slice(1)], data }));
    });
    return out;
  }

  checked(inv: Mediator, what: string, t: TensorPayload): void {
    try {
      checkPayload(t);
    } catch (e) {
      throw new InterventionError(
        blockError('ProtocolError', `${what}: ${(e as Error).message}`, 'protocol'),
        inv.index,
      );
    }
  }

  private checkValue(inv: Mediator, what: string, v: TensorPayload, dtype: string, shape: number[]): void {
    this.checked(inv, what, v);
    if (v.dtype !== dtype) {
      throw new InterventionError(blockError('DtypeMismatch', `${what}: expected ${dtype}, got ${v.dtype}`), inv.index);
    }
    if (!sameShape(v.shape, shape)) {
      throw new InterventionError(
        blockError('ShapeMismatch', `${what}: expected shape [${shape.join(', ')}], got [${v.shape.join(', ')}]`),
        inv.index,
      );
    }
    if (isFloatDtype(v.dtype)) {
      const bad = firstNonFinite(v);
      if (bad >= 0)
        throw new InterventionError(
          blockError('NonFinite', `${what}: element ${bad} is not finite (NaN or ±Infinity)`),
          inv.index,
        );
    }
  }

  /** Replaces the invoke's rows of the point's tensors (the current value fixes the expected shape). */
  applySwap(inv: Mediator, p: ObservationPoint, values: TensorPayload[]): void {
    const v = this.view;
    const pass = this.pass;
    const m = v.ctx.graph.modules.get(p.path)!;
    p.tensors.forEach((name, j) => {
      const current = pass.table.get(v.aliasFor(name, p) ?? name);
      if (!current)
        throw new InterventionError(
          blockError('NotProvided', `${v.addrOf(p)}: tensor ${name} was not computed`),
          inv.index,
        );
      const batched = v.ctx.batched(name);
      if (!batched && v.mediators.length > 1) {
        throw new InterventionError(
          blockError(
            'SharedTensor',
            `${v.addrOf(p)} is shared by every invoke's rows (it has no batch dimension), so one invoke cannot replace it`,
          ),
          inv.index,
        );
      }
      const want = batched ? [inv.rows, ...current.dims.slice(1)] : [...current.dims];
      this.checkValue(inv, `swap of ${v.addrOf(p)}`, values[j]!, current.type, want);
      if (p.point === 'input' && p.path !== '' && this.readOutside(name, m)) {
        // Other nodes read this tensor too: only the module's own nodes see the swapped value (a copy of its own).
        let alias = pass.aliases.find((a) => a.tensor === name && a.from === m.start && a.to === m.end);
        const replaced = !batched
          ? payloadToOrt(values[j]!)
          : alias
            ? this.withRows(current, inv.row, values[j]!)
            : pass.own(replaceRows(current, inv.row, values[j]!));
        if (!alias) {
          alias = { tensor: name, alias: `${name}${ALIAS_MARK}${m.path}`, from: m.start, to: m.end };
          pass.aliases.push(alias);
        }
        pass.table.set(alias.alias, replaced);
        pass.record?.replace(pass.pos, alias.alias, inv.index);
      } else {
        pass.table.set(name, batched ? this.withRows(current, inv.row, values[j]!) : payloadToOrt(values[j]!));
        pass.record?.replace(pass.pos, name, inv.index);
      }
    });
  }

  /**
   * `t` with rows from `row` replaced: the first swap at a tensor copies the batch once, later ones (other invokes at
   * the same point) write their rows into that copy, so N invokes swapping one point cost N row writes, not N copies.
   */
  private withRows(t: OrtTensor, row: number, v: TensorPayload): OrtTensor {
    if (!this.pass.isOwned(t)) return this.pass.own(replaceRows(t, row, v));
    writeRowsInPlace(t, row, v);
    return t;
  }

  /** Writes an invoke's skip values into its rows of the module's outputs. */
  writeRows(inv: Mediator, p: ObservationPoint, values: TensorPayload[]): void {
    const pass = this.pass;
    p.tensors.forEach((name, j) => {
      const current = pass.table.get(name)!;
      const v = values[j]!;
      pass.table.set(name, this.view.ctx.batched(name) ? this.withRows(current, inv.row, v) : payloadToOrt(v));
      pass.record?.replace(pass.pos, name, inv.index);
    });
  }

  /** Whether a node of `m` writes a cache tensor (a present output). */
  private holdsCache(m: ModuleNode): boolean {
    const { kv, graph } = this.view.ctx;
    return kv.slots.some((s) => {
      const k = graph.producer.get(s.present);
      return k !== undefined && k >= m.start && k < m.end;
    });
  }

  /** Whether a node outside `m` at or after its start reads `tensor`. */
  private readOutside(tensor: string, m: ModuleNode): boolean {
    const g = this.view.ctx.graph;
    return (g.consumers.get(tensor) ?? []).some((c) => c >= m.start && !isWithin(g.scopes[c]!, m.path));
  }
}
