// Static analysis of a model's graph: canonical node order, producers and consumers, and the module tree with
// each module's node range, outputs and inputs.
//
// A module's outputs are the tensors its nodes produce that a node outside it reads, or that are graph outputs;
// its inputs are the tensors its nodes read that come from outside it (graph inputs or outside nodes), leaving
// out initializers and Constant-node outputs (weights and literals, not activations). Shape arithmetic is not
// part of a module's interface either: a tensor computed only from Shape/Size outputs, literals and integer
// initializers (e.g. the `[batch, seq, -1]` a Reshape takes, which exporters share across layers) is left out
// of every module's outputs and inputs, though segments still carry it across cuts. The model itself is
// module '' with the graph's inputs and outputs. Values an exporter computed once in one layer and shares with the
// other layers (the attention mask, rotary cos/sin) are not outputs of that layer (graph/shared-values.ts).
import type { GraphProto, NodeProto, TensorProto, ValueInfoProto } from '../onnx/types.js';
import { isCacheInput, isCacheOutput } from './cache-names.js';
import { canonicalOrder } from './canonical-order.js';
import { ancestorsAndSelf, commonScope, isWithin, nodeScope, parentPath } from './scopes.js';
import { isSharedValue } from './shared-values.js';
import { withSourceScopes } from './source-ops.js';
import { nodeReads, nodeWrites } from './tensors-used.js';

export interface ModuleNode {
  path: string;
  /** Direct child modules, in forward order. */
  children: string[];
  /** A container of numbered children with no nodes of its own (torch ModuleList): not addressable itself. */
  isList: boolean;
  nodeCount: number;
  /** Canonical positions [start, end) of the module's nodes; a contiguous module has end - start === nodeCount. */
  start: number;
  end: number;
  contiguous: boolean;
  /** Output tensor names, in production order. */
  outputs: string[];
  /** Input tensor names, in order of first use inside the module. */
  inputs: string[];
}

export interface ModelGraph {
  /** Nodes in canonical order; every position below refers to this order. */
  nodes: NodeProto[];
  scopes: string[];
  reads: string[][];
  writes: string[][];
  /** Tensor → position of the node producing it (graph inputs and initializers are absent). */
  producer: Map<string, number>;
  /** Tensor → positions of the nodes reading it, ascending. */
  consumers: Map<string, number[]>;
  initializers: Map<string, TensorProto>;
  /** Positions of Constant nodes: their outputs are literals, copied into every segment that reads them. */
  constants: Set<number>;
  graphInputs: ValueInfoProto[];
  graphOutputs: ValueInfoProto[];
  modules: Map<string, ModuleNode>;
}

function isConstantNode(n: NodeProto): boolean {
  return n.op_type === 'Constant' && (n.domain ?? '') === '' && (n.input ?? []).every((i) => i === '');
}

export function analyzeGraph(graph: GraphProto): ModelGraph {
  const fileNodes = graph.node ?? [];
  const initializers = new Map<string, TensorProto>();
  for (const t of graph.initializer ?? []) if (t.name) initializers.set(t.name, t);

  const fileReads = fileNodes.map(nodeReads);
  const fileWrites = fileNodes.map(nodeWrites);
  const fileProducer = new Map<string, number>();
  fileWrites.forEach((ws, i) => {
    ws.forEach((t) => {
      fileProducer.set(t, i);
    });
  });
  const fileConsumers = new Map<string, number[]>();
  fileReads.forEach((rs, i) => {
    rs.forEach((t) => {
      (fileConsumers.get(t) ?? fileConsumers.set(t, []).get(t)!).push(i);
    });
  });

  const moduleScopes = resolveScopes(fileNodes, fileReads, fileWrites, fileProducer, fileConsumers);
  const fileConstants = new Set<number>();
  for (const [i, n] of fileNodes.entries()) if (isConstantNode(n)) fileConstants.add(i);
  const fileShapeOnly = shapeArithmetic(fileNodes, fileReads, fileWrites, fileConstants, initializers);
  const scopes = withSourceScopes(fileNodes, moduleScopes, fileWrites, fileShapeOnly);
  const producers = fileReads.map((rs) =>
    rs.map((t) => fileProducer.get(t)).filter((p): p is number => p !== undefined),
  );
  // The order comes from the module scopes alone: an operation's own scope (source-ops.ts) is a single node inside
  // its module, so it changes no module's range, and the order (hence every segment) stays what it was.
  const { order, dissolved } = canonicalOrder({ scopes: moduleScopes, producers });

  const nodes = order.map((i) => fileNodes[i]!);
  const cScopes = order.map((i) => scopes[i]!);
  const reads = order.map((i) => fileReads[i]!);
  const writes = order.map((i) => fileWrites[i]!);
  const producer = new Map<string, number>();
  writes.forEach((ws, k) => {
    ws.forEach((t) => {
      producer.set(t, k);
    });
  });
  const consumers = new Map<string, number[]>();
  reads.forEach((rs, k) => {
    rs.forEach((t) => {
      (consumers.get(t) ?? consumers.set(t, []).get(t)!).push(k);
    });
  });
  const constants = new Set<number>();
  nodes.forEach((n, k) => {
    if (isConstantNode(n)) constants.add(k);
  });

  const graphInputs = (graph.input ?? []).filter((v) => !initializers.has(v.name));
  const graphOutputs = graph.output ?? [];
  const shapeOnly = shapeArithmetic(nodes, reads, writes, constants, initializers);
  const modules = buildModules(
    cScopes,
    reads,
    writes,
    producer,
    consumers,
    shapeOnly,
    initializers,
    graphInputs,
    graphOutputs,
    dissolved,
  );
  return {
    nodes,
    scopes: cScopes,
    reads,
    writes,
    producer,
    consumers,
    initializers,
    constants,
    graphInputs,
    graphOutputs,
    modules,
  };
}

const INTEGER_TYPES = new Set([2, 3, 4, 5, 6, 7, 12, 13]);

/** Tensors computed only from shapes, literals and integer initializers. */
function shapeArithmetic(
  nodes: NodeProto[],
  reads: string[][],
  writes: string[][],
  constants: Set<number>,
  initializers: Map<string, TensorProto>,
): Set<string> {
  const out = new Set<string>();
  for (const [name, t] of initializers) if (INTEGER_TYPES.has(t.data_type ?? 0)) out.add(name);
  nodes.forEach((n, k) => {
    const op = (n.domain ?? '') === '' ? n.op_type : '';
    const derived =
      constants.has(k) ||
      op === 'Shape' ||
      op === 'Size' ||
      (reads[k]!.length > 0 && reads[k]!.every((t) => out.has(t)));
    if (derived) for (const t of writes[k]!) out.add(t);
  });
  return out;
}

/** Nodes without a scope of their own take the deepest scope common to their neighbours (readers and producers). */
function resolveScopes(
  nodes: NodeProto[],
  reads: string[][],
  writes: string[][],
  producer: Map<string, number>,
  consumers: Map<string, number[]>,
): string[] {
  const scopes: Array<string | null> = nodes.map(nodeScope);
  let changed = true;
  while (changed) {
    changed = false;
    for (let i = 0; i < nodes.length; i++) {
      if (scopes[i] !== null) continue;
      const near: string[] = [];
      for (const t of writes[i]!) for (const c of consumers.get(t) ?? []) if (scopes[c] !== null) near.push(scopes[c]!);
      if (!isConstantNode(nodes[i]!)) {
        for (const t of reads[i]!) {
          const p = producer.get(t);
          if (p !== undefined && scopes[p] !== null) near.push(scopes[p]!);
        }
      }
      if (near.length > 0) {
        scopes[i] = commonScope(near);
        changed = true;
      }
    }
  }
  return scopes.map((s) => s ?? '');
}

function buildModules(
  scopes: string[],
  reads: string[][],
  writes: string[][],
  producer: Map<string, number>,
  consumers: Map<string, number[]>,
  shapeOnly: Set<string>,
  initializers: Map<string, TensorProto>,
  graphInputs: ValueInfoProto[],
  graphOutputs: ValueInfoProto[],
  dissolved: Set<string>,
): Map<string, ModuleNode> {
  const modules = new Map<string, ModuleNode>();
  const directNodes = new Map<string, number>();
  const get = (path: string): ModuleNode => {
    let m = modules.get(path);
    if (!m) {
      m = {
        path,
        children: [],
        isList: false,
        nodeCount: 0,
        start: Infinity,
        end: -Infinity,
        contiguous: true,
        outputs: [],
        inputs: [],
      };
      modules.set(path, m);
    }
    return m;
  };
  scopes.forEach((s, k) => {
    directNodes.set(s, (directNodes.get(s) ?? 0) + 1);
    for (const p of ancestorsAndSelf(s)) {
      const m = get(p);
      m.nodeCount++;
      m.start = Math.min(m.start, k);
      m.end = Math.max(m.end, k + 1);
    }
  });
  if (!modules.has('')) get('').start = 0;
  const root = get('');
  if (root.nodeCount === 0) root.end = 0;

  for (const m of modules.values()) {
    m.contiguous = m.end - m.start === m.nodeCount && !dissolved.has(m.path);
    const parent = parentPath(m.path);
    if (parent !== null) get(parent).children.push(m.path);
  }
  for (const m of modules.values()) {
    m.children.sort((a, b) => modules.get(a)!.start - modules.get(b)!.start);
    m.isList =
      m.path !== '' &&
      (directNodes.get(m.path) ?? 0) === 0 &&
      m.children.length > 0 &&
      m.children.every((c) => /^\d+$/.test(c.slice(m.path.length + 1)));
  }

  const outputSets = new Map<string, Set<string>>();
  const inputSets = new Map<string, Set<string>>();
  const add = (sets: Map<string, Set<string>>, path: string, t: string) =>
    (sets.get(path) ?? sets.set(path, new Set()).get(path)!).add(t);
  const isGraphOutput = new Set(graphOutputs.map((v) => v.name));

  for (let k = 0; k < scopes.length; k++) {
    const chain = ancestorsAndSelf(scopes[k]!).slice(1);
    for (const t of writes[k]!) {
      if (shapeOnly.has(t)) continue;
      const readers = consumers.get(t) ?? [];
      for (const m of chain) {
        if (isGraphOutput.has(t) || readers.some((c) => !isWithin(scopes[c]!, m))) add(outputSets, m, t);
      }
    }
    for (const t of reads[k]!) {
      if (initializers.has(t) || shapeOnly.has(t)) continue;
      const p = producer.get(t);
      for (const m of chain) if (p === undefined || !isWithin(scopes[p]!, m)) add(inputSets, m, t);
    }
  }
  const shared = { scopes, consumers, isList: (p: string) => modules.get(p)?.isList ?? false };
  for (const m of modules.values()) {
    m.outputs = [...(outputSets.get(m.path) ?? [])].filter((t) =>
      isGraphOutput.has(t) ? !isCacheOutput(t) : !isSharedValue(shared, m.path, t),
    );
    m.inputs = [...(inputSets.get(m.path) ?? [])].filter((t) => !isCacheInput(t));
  }
  // The model's output is what its forward returns for the prompt; the cache it also returns is not observable here.
  root.outputs = graphOutputs.map((v) => v.name).filter((t) => !isCacheOutput(t));
  root.inputs = graphInputs.map((v) => v.name).filter((t) => !isCacheInput(t));
  return modules;
}
