"""What tf2onnx writes for our layers, rewritten as the ONNX operators runtimes fuse
(onnx; imported when first used).

tf2onnx converts TensorFlow's ops one by one: a Keras `LayerNormalization` becomes
twelve nodes (`moments` as `GlobalAveragePool`, `Rsqrt` as `Sqrt` and `Reciprocal`),
the exact GELU `0.5 x erfc(-x / sqrt 2)` a form ONNX Runtime's GELU fusion does not
recognise, and a `Dense` on a sequence a `Tensordot` (reshape to a matrix, `MatMul`,
shape arithmetic, reshape back). `simplified` writes each as ONNX's
`LayerNormalization`, the erf form of GELU and one batched `MatMul`; a scope whose
nodes are not the expected pattern is left as it was (slower, never wrong). The
exports' tests compare the result with the SavedModel within 1e-5.
"""

import collections

import numpy as np


def _layer_norm_nodes(scope, nodes, initializers):
    """`LayerNormalization` for the nodes of one Keras layer norm (`scope`), or None."""
    from onnx import helper, numpy_helper

    named = {node.name[len(scope) + 1 :]: node for node in nodes}
    parts = ("moments/mean", "moments/variance", "add", "mul", "add_1", "add_2")
    if not all(part in named for part in parts):
        return None, []
    epsilon = [i for i in named["add"].input if i in initializers]
    gamma = [i for i in named["mul"].input if i in initializers]
    beta = [i for i in named["add_1"].input if i in initializers]
    if not (len(epsilon) == len(gamma) == len(beta) == 1):
        return None, []
    tensors = [
        numpy_helper.from_array(
            numpy_helper.to_array(initializers[source]).reshape(-1), f"{scope}/{name}"
        )
        for name, source in (("gamma", gamma[0]), ("beta", beta[0]))
    ]
    node = helper.make_node(
        "LayerNormalization",
        [named["moments/mean"].input[0], f"{scope}/gamma", f"{scope}/beta"],
        [named["add_2"].output[0]],
        name=f"{scope}/LayerNormalization",
        axis=-1,
        epsilon=float(numpy_helper.to_array(initializers[epsilon[0]])),
    )
    return node, tensors


def _gelu_nodes(scope, nodes, producers):
    """`x * (1 + erf(x / sqrt 2)) * 0.5` for one exact GELU (`scope`), as ONNX Runtime
    fuses it, with the nodes it replaces (the `Erf` the `Erfc` handler wrote too)."""
    from onnx import helper, numpy_helper

    named = {node.name[len(scope) + 1 :]: node for node in nodes}
    if not all(part in named for part in ("Neg", "Erfc", "mul_2")):
        return [], [], []
    erfs = [producers[i] for i in named["Erfc"].input if i in producers]
    erfs = [node for node in erfs if node.op_type == "Erf"]
    x, out, s = named["Neg"].input[0], named["mul_2"].output[0], f"{scope}/"
    tensors = [
        numpy_helper.from_array(np.array(value, np.float32), s + name)
        for name, value in (("rsqrt2", 0.5**0.5), ("one", 1.0), ("half", 0.5))
    ]
    new = [
        helper.make_node("Mul", [x, s + "rsqrt2"], [s + "scaled"], name=s + "scaled"),
        helper.make_node("Erf", [s + "scaled"], [s + "erf"], name=s + "erf"),
        helper.make_node("Add", [s + "erf", s + "one"], [s + "erf_1"], name=s + "erf_1"),
        helper.make_node("Mul", [x, s + "erf_1"], [s + "x_erf_1"], name=s + "x_erf_1"),
        helper.make_node("Mul", [s + "x_erf_1", s + "half"], [out], name=s + "gelu"),
    ]
    return new, tensors, nodes + erfs


def _scopes(nodes, marker):
    """`{scope: nodes}` of the nodes whose name holds `marker` (`scope` ends before it)."""
    found = collections.defaultdict(list)
    for node in nodes:
        if marker in node.name:
            found[node.name.split(marker)[0] + marker.rstrip("/")].append(node)
    return found


def simplified(model):
    """`model` (tf2onnx's, modified in place and returned) with layer norms, exact GELUs
    and sequence `Dense` layers as ONNX Runtime's fusions and kernels expect them."""
    from onnx import helper

    graph = model.graph
    initializers = {t.name: t for t in graph.initializer}
    producers = {o: node for node in graph.node for o in node.output}
    consumers = collections.defaultdict(list)
    for node in graph.node:
        for name in node.input:
            consumers[name].append(node)
    dropped, added, tensors = set(), [], []
    for node in graph.node:  # Tensordot: Reshape -> MatMul(W) -> Reshape == MatMul(x, W)
        before, after = producers.get(node.input[0]), consumers[node.output[0]]
        if (
            node.op_type == "MatMul"
            and node.name.endswith("/Tensordot/MatMul")
            and node.input[1] in initializers
            and before is not None
            and before.op_type == "Reshape"
            and len(consumers[before.output[0]]) == 1
            and [n.op_type for n in after] == ["Reshape"]
        ):
            dropped.update(id(n) for n in (before, node, after[0]))
            added.append(
                helper.make_node(
                    "MatMul", [before.input[0], node.input[1]], [after[0].output[0]], name=node.name
                )
            )
    for scope in _scopes(graph.node, "/moments/"):
        scope = scope[: -len("/moments")]
        members = [n for n in graph.node if n.name.startswith(scope + "/")]
        node, new_tensors = _layer_norm_nodes(scope, members, initializers)
        if node is not None:
            dropped.update(id(n) for n in members)
            added.append(node)
            tensors += new_tensors
    for scope, nodes in _scopes(graph.node, "/Gelu/").items():
        new, new_tensors, replaced = _gelu_nodes(scope, nodes, producers)
        dropped.update(id(n) for n in replaced)
        added += new
        tensors += new_tensors
    kept = [node for node in graph.node if id(node) not in dropped] + added
    graph.initializer.extend(tensors)
    _sort_and_prune(graph, kept)
    return model


def _sort_and_prune(graph, nodes):
    """`graph`'s nodes set to `nodes` in an order each node follows its inputs, without
    the nodes and initializers no output needs."""
    ready = {v.name for v in graph.input} | {t.name for t in graph.initializer} | {""}
    ordered, waiting = [], list(nodes)
    while waiting:
        still = []
        for node in waiting:
            if all(name in ready for name in node.input):
                ordered.append(node)
                ready.update(node.output)
            else:
                still.append(node)
        if len(still) == len(waiting):
            raise ValueError(f"ONNX rewrite left inputs unset: {still[0].name}")
        waiting = still
    needed, live = {v.name for v in graph.output}, []
    for node in reversed(ordered):
        if any(name in needed for name in node.output):
            live.append(node)
            needed.update(node.input)
    del graph.node[:]
    graph.node.extend(reversed(live))
    used = [t for t in graph.initializer if t.name in needed]
    del graph.initializer[:]
    graph.initializer.extend(used)
