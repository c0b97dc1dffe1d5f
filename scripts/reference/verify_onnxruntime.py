"""Check the committed fixture with onnxruntime (Python): the ONNX files reproduce the PyTorch records.

For each ONNX file it derives module boundaries from the graph (TorchScript node-name scopes, or
the dynamo exporter's pkg.torch.onnx.name_scopes metadata), the same way the project's runtime is
specified to: a module's output is what its nodes produce that nodes outside it (or the graph
output) consume; its input is what its nodes consume from outside (initialisers and Constant nodes
excluded). Every recorded tensor is compared with the matching boundary tensor. Intervention cases
are run on a copy of the graph whose consumers of the intervened tensor read a new graph input fed
with zeros. Also compares ONNX logits with PyTorch at shapes other than the recorded one (dynamic
axes). Prints one JSON object with the max abs differences; exits 1 if any exceeds the tolerance.
"""

from __future__ import annotations

import argparse
import ast
import json
import struct
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

HERE = Path(__file__).resolve().parent
DEFAULT_FIXTURE = HERE.parents[1] / "tests" / "fixtures" / "gpt2-reference"
SWAP_INPUT = "__reference_swap__"
DTYPES = {"F32": np.float32, "I64": np.int64}


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    raw = path.read_bytes()
    (header_len,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + header_len])
    data = raw[8 + header_len :]
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        dtype = np.dtype(DTYPES[info["dtype"]]).newbyteorder("<")
        tensors[name] = np.frombuffer(data[begin:end], dtype=dtype).reshape(info["shape"])
    return tensors


def torchscript_scope(node: onnx.NodeProto) -> str | None:
    """'/transformer/h.0/mlp/c_fc/Gemm' -> 'transformer.h.0.mlp.c_fc'; '/Shape' -> ''; 'Constant_5' -> None."""
    if not node.name.startswith("/"):
        return None
    return ".".join(node.name.split("/")[1:-1])


def dynamo_scope(node: onnx.NodeProto) -> str | None:
    """Last module entry of pkg.torch.onnx.name_scopes (a Python list repr; its last entry is the fx node)."""
    meta = {p.key: p.value for p in node.metadata_props}
    if "pkg.torch.onnx.name_scopes" not in meta:
        return None
    scopes = ast.literal_eval(meta["pkg.torch.onnx.name_scopes"])[:-1]
    scopes = [s for s in scopes if s != "_empty_nn_module_stack_from_metadata_hook"]
    return scopes[-1] if scopes else ""


class Boundaries:
    def __init__(self, model: onnx.ModelProto, scope_of):
        graph = model.graph
        self.graph = graph
        self.initializers = {i.name for i in graph.initializer}
        self.graph_outputs = {o.name for o in graph.output}
        self.producer: dict[str, int] = {}
        self.consumers: dict[str, list[int]] = {}
        self.scope: list[str | None] = []
        for index, node in enumerate(graph.node):
            for t in node.output:
                self.producer[t] = index
            for t in node.input:
                if t:
                    self.consumers.setdefault(t, []).append(index)
        for node in graph.node:
            scope = scope_of(node)
            # Nodes without a scope (exporter-inserted Split in the dynamo graph) take their producer's.
            if scope is None and node.op_type != "Constant" and node.input and node.input[0] in self.producer:
                scope = self.scope[self.producer[node.input[0]]]
            self.scope.append(scope)

    def inside(self, index: int, path: str) -> bool:
        scope = self.scope[index]
        return scope is not None and (scope == path or scope.startswith(path + "."))

    def is_constant(self, tensor: str) -> bool:
        if tensor in self.initializers:
            return True
        index = self.producer.get(tensor)
        return index is not None and self.graph.node[index].op_type == "Constant"

    def outputs(self, path: str) -> list[str]:
        found = []
        for index, node in enumerate(self.graph.node):
            if not self.inside(index, path):
                continue
            for t in node.output:
                outside = [c for c in self.consumers.get(t, []) if not self.inside(c, path)]
                if (outside or t in self.graph_outputs) and t not in found:
                    found.append(t)
        return found

    def inputs(self, path: str) -> list[str]:
        found = []
        for index, node in enumerate(self.graph.node):
            if not self.inside(index, path):
                continue
            for t in node.input:
                if not t or self.is_constant(t) or t in found:
                    continue
                producer = self.producer.get(t)
                if producer is None or not self.inside(producer, path):
                    found.append(t)
        return found

    def consumers_of(self, tensor: str, path: str, inside: bool) -> list[int]:
        return [c for c in self.consumers.get(tensor, []) if self.inside(c, path) == inside]


def float_boundary(bounds: Boundaries, key: str, shapes: dict[str, list]) -> tuple[str, list[str]]:
    """The one float boundary tensor for a recorded key whose shape matches the reference."""
    if key == "logits":
        return "logits", ["logits"]
    path, point = key.rsplit(".", 1)
    candidates = bounds.outputs(path) if point == "output" else bounds.inputs(path)
    matching = [t for t in candidates if shapes.get(t) == "float"]
    if len(matching) != 1:
        raise SystemExit(f"{key}: expected one float boundary tensor, found {matching} among {candidates}")
    return matching[0], candidates


def float_tensors(model: onnx.ModelProto) -> dict[str, str]:
    inferred = onnx.shape_inference.infer_shapes(model)
    kinds = {}
    for info in list(inferred.graph.value_info) + list(inferred.graph.output):
        if info.type.tensor_type.elem_type == onnx.TensorProto.FLOAT:
            kinds[info.name] = "float"
    return kinds


def session(model: onnx.ModelProto) -> ort.InferenceSession:
    options = ort.SessionOptions()
    # Extra outputs name intermediates; without graph optimisation none of them is fused away.
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def run_case(model, bounds, kinds, case, tensors, input_ids) -> dict[str, dict]:
    keys = list(case["tensors"])
    targets = {k: float_boundary(bounds, k, kinds)[0] for k in keys}
    patched = onnx.ModelProto()
    patched.CopyFrom(model)
    feeds = {"input_ids": input_ids}
    intervention = case["intervention"]
    swapped_key = None
    if intervention is not None:
        swapped_key = f"{intervention['path']}.{intervention['point']}"
        tensor = targets[swapped_key]
        readers = bounds.consumers_of(tensor, intervention["path"], inside=intervention["point"] == "input")
        for index in readers:
            node = patched.graph.node[index]
            for slot, name in enumerate(node.input):
                if name == tensor:
                    node.input[slot] = SWAP_INPUT
        patched.graph.input.append(onnx.helper.make_tensor_value_info(SWAP_INPUT, onnx.TensorProto.FLOAT, None))
        feeds[SWAP_INPUT] = np.zeros(tensors[case["tensors"][swapped_key]].shape, dtype=np.float32)
    wanted = sorted({t for k, t in targets.items() if k != swapped_key})
    known = {o.name for o in patched.graph.output}
    for t in wanted:
        if t not in known:
            patched.graph.output.append(onnx.helper.make_empty_tensor_value_info(t))
    outputs = dict(zip(wanted, session(patched).run(wanted, feeds)))
    result = {}
    for key in keys:
        reference = tensors[case["tensors"][key]]
        actual = feeds[SWAP_INPUT] if key == swapped_key else outputs[targets[key]]
        if actual.shape != reference.shape:
            raise SystemExit(f"{case['name']} {key}: ONNX shape {actual.shape} != reference {reference.shape}")
        result[key] = {"onnx_tensor": targets[key], "max_abs_diff": float(np.max(np.abs(actual - reference)))}
    return result


def check_file(path: Path, scope_of, reference: dict, tensors: dict) -> dict:
    model = onnx.load(str(path))
    bounds = Boundaries(model, scope_of)
    kinds = float_tensors(model)
    input_ids = tensors[reference["input_ids_tensor"]]
    cases = {c["name"]: run_case(model, bounds, kinds, c, tensors, input_ids) for c in reference["cases"]}
    default = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    logits = default.run(["logits"], {"input_ids": input_ids})[0]
    plain_logits = float(np.max(np.abs(logits - tensors["plain/logits"])))
    return {"cases": cases, "plain_logits_default_optimisation": plain_logits}


def check_dynamic_shapes(fixture: Path, files: list[Path]) -> dict:
    """ONNX logits vs PyTorch at batch/sequence sizes other than the recorded [2, 8]."""
    import torch

    sys.path.insert(0, str(HERE))
    from export_reference import build_model

    model = build_model()
    rng = np.random.default_rng(1)
    result = {}
    for shape in [(1, 1), (1, 5), (3, 12), (2, 64)]:
        ids = rng.integers(0, 512, size=shape, dtype=np.int64)
        with torch.no_grad():
            expected = model(torch.from_numpy(ids)).numpy()
        for path in files:
            got = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(["logits"], {"input_ids": ids})[0]
            result[f"{path.name} {list(shape)}"] = float(np.max(np.abs(got - expected)))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--fixture", type=Path, default=DEFAULT_FIXTURE)
    parser.add_argument("--no-torch", action="store_true", help="skip the PyTorch dynamic-shape comparison")
    args = parser.parse_args()
    reference = json.loads((args.fixture / "reference.json").read_text())
    tensors = read_safetensors(args.fixture / "reference.safetensors")
    report = {"onnxruntime": ort.__version__, "tolerance": reference["tolerance"], "files": {}}
    files = [(args.fixture / "model.onnx", torchscript_scope), (args.fixture / "model-dynamo.onnx", dynamo_scope)]
    files = [(p, s) for p, s in files if p.exists()]
    for path, scope_of in files:
        report["files"][path.name] = check_file(path, scope_of, reference, tensors)
    if not args.no_torch:
        report["dynamic_shapes_vs_torch"] = check_dynamic_shapes(args.fixture, [p for p, _ in files])
    worst = 0.0
    for checked in report["files"].values():
        worst = max([worst, checked["plain_logits_default_optimisation"]]
                    + [v["max_abs_diff"] for case in checked["cases"].values() for v in case.values()])
    worst = max([worst] + list(report.get("dynamic_shapes_vs_torch", {}).values()))
    report["worst_max_abs_diff"] = worst
    print(json.dumps(report, indent=2))
    sys.exit(0 if worst <= reference["tolerance"] else 1)


if __name__ == "__main__":
    main()
