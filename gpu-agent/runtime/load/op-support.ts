// Ops a model may use: the standard ONNX domains onnxruntime implements on CPU and CUDA, plus the model's own local
// functions (dynamo exports carry some). Anything else is refused at load with the op and the node named, before
// onnxruntime is asked; an op onnxruntime still cannot run (a standard op at an opset or type it lacks) is named from
// its session error the same way.
import type { ModelProto } from '../onnx/types.js';
import { ModelLoadError } from '../errors.js';

const KNOWN_DOMAINS = new Set(['', 'ai.onnx', 'ai.onnx.ml', 'com.microsoft', 'com.microsoft.nchwc']);

export function checkOps(model: ModelProto): void {
  const local = new Set((model.functions ?? []).map((f) => `${f.domain ?? ''}::${f.name ?? ''}`));
  for (const n of model.graph?.node ?? []) {
    const domain = n.domain ?? '';
    if (KNOWN_DOMAINS.has(domain) || local.has(`${domain}::${n.op_type ?? ''}`)) continue;
    throw opUnsupported(
      n.op_type ?? '?',
      n.name ?? '',
      domain,
      `domain ${JSON.stringify(domain)} is not one onnxruntime implements (${[...KNOWN_DOMAINS].map((d) => JSON.stringify(d)).join(', ')}) and the model defines no such function`,
    );
  }
}

function opUnsupported(op: string, node: string, domain: string, why: string): ModelLoadError {
  return new ModelLoadError(
    'MODEL_OP_UNSUPPORTED',
    `node ${JSON.stringify(node)} uses op ${domain ? `${domain}:` : ''}${op}, which the runtime cannot run: ${why}. Re-export with standard ONNX ops (e.g. a newer opset, or without custom ops)`,
    {
      details: { op, node, domain },
    },
  );
}

/** The MODEL_OP_UNSUPPORTED an onnxruntime session error stands for, when it is about an op; else undefined. */
export function opErrorFromOrt(e: unknown): ModelLoadError | undefined {
  const msg = e instanceof Error ? e.message : String(e);
  const impl = /Could not find an implementation for (\S+?)\((\d+)\) node with name '([^']*)'/.exec(msg);
  if (impl)
    return opUnsupported(
      impl[1]!,
      impl[3]!,
      '',
      `onnxruntime has no kernel for it at opset ${impl[2]} with these input types`,
    );
  const none =
    /In Node, \("([^"]*)", (\w+), "([^"]*)", -?\d+\).*No Op registered for \w+ with domain_version of (\d+)/s.exec(msg);
  if (none) return opUnsupported(none[2]!, none[1]!, none[3]!, `no such op is registered at opset ${none[4]}`);
  const reg = /(?:([\w.]+):)?(\w+)\((-?\d+)\) is not a registered function\/op/.exec(msg);
  if (reg) return opUnsupported(reg[2]!, '', reg[1] ?? '', 'onnxruntime does not know it');
  return undefined;
}
