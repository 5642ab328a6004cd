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


def _torch_gelu(x, out, s):
    """PyTorch's export of the erf GELU of `x` into `out`, node for node (the pattern
    ONNX Runtime fuses into `BiasGelu` with the bias before it): `(nodes, tensors)`."""
    from onnx import helper, numpy_helper

    tensors = [
        numpy_helper.from_array(np.array(value, np.float32), s + name)
        for name, value in (("sqrt2", 2.0**0.5), ("one", 1.0), ("half", 0.5))
    ]
    nodes = [
        helper.make_node("Div", [x, s + "sqrt2"], [s + "scaled"], name=s + "scaled"),
        helper.make_node("Erf", [s + "scaled"], [s + "erf"], name=s + "erf"),
        helper.make_node("Add", [s + "erf", s + "one"], [s + "erf_1"], name=s + "erf_1"),
        helper.make_node("Mul", [x, s + "erf_1"], [s + "x_erf_1"], name=s + "x_erf_1"),
        helper.make_node("Mul", [s + "x_erf_1", s + "half"], [out], name=s + "gelu"),
    ]
    return nodes, tensors


def _gelu_nodes(scope, nodes, producers):
    """`x * (1 + erf(x / sqrt 2)) * 0.5` for one exact GELU as TensorFlow writes it
    (`0.5 x erfc(-x / sqrt 2)`, `scope`), with the nodes it replaces (and the `Erf` the
    `Erfc` handler wrote)."""
    named = {node.name[len(scope) + 1 :]: node for node in nodes}
    if not all(part in named for part in ("Neg", "Erfc", "mul_2")):
        return [], [], []
    erfs = [producers[i] for i in named["Erfc"].input if i in producers]
    erfs = [node for node in erfs if node.op_type == "Erf"]
    x, out = named["Neg"].input[0], named["mul_2"].output[0]
    new, tensors = _torch_gelu(x, out, f"{scope}/")
    return new, tensors, nodes + erfs


def _erf_gelu_nodes(erf, initializers, producers, consumers):
    """The same for a GELU written `0.5 x (1 + erf(x * (1 / sqrt 2)))` (the feed-forward
    net's, the form TensorFlow fuses; `erf` its `Erf`), in any order of its products:
    `(nodes, tensors, replaced)`, or three empty lists when `erf` is not in one."""

    def single(name, op_type):  # the one node reading `name`, when it is an `op_type`
        readers = consumers[name]
        return readers[0] if len(readers) == 1 and readers[0].op_type == op_type else None

    def split(node, value):  # (the other input, ) when one input is the constant `value`
        constants = [_constant(i, initializers, producers) for i in node.input]
        for i, c in enumerate(constants):
            if c is not None and c.size == 1 and np.isclose(float(np.ravel(c)[0]), value):
                return node.input[1 - i]
        return None

    scaled = producers.get(erf.input[0])
    x = scaled is not None and scaled.op_type == "Mul" and split(scaled, 0.5**0.5)
    plus = single(erf.output[0], "Add")
    if not x or plus is None or split(plus, 1.0) != erf.output[0]:
        return [], [], []
    first = single(plus.output[0], "Mul")
    if first is None:
        return [], [], []
    other = first.input[1] if first.input[0] == plus.output[0] else first.input[0]
    half, last = producers.get(other), None
    replaced = [scaled, erf, plus, first]
    if half is not None and half.op_type == "Mul" and split(half, 0.5) == x:
        last = first  # (0.5 x) (1 + erf)
        replaced.append(half)
    elif other == x or split(first, 0.5) == plus.output[0]:
        last = single(first.output[0], "Mul")  # (x (1 + erf)) 0.5 or x ((1 + erf) 0.5)
        if last is None or (split(last, 0.5) if other == x else x) not in last.input:
            return [], [], []
        replaced.append(last)
    else:
        return [], [], []
    if any(len(consumers[n.output[0]]) != 1 for n in replaced if n is not last):
        return [], [], []
    new, tensors = _torch_gelu(x, last.output[0], f"{erf.name}/gelu/")
    return new, tensors, replaced


def _constant(name, initializers, producers):
    """The value of `name` when it is an initializer or a `Constant` node's, else None."""
    from onnx import numpy_helper

    if name in initializers:
        return numpy_helper.to_array(initializers[name])
    node = producers.get(name)
    if node is not None and node.op_type == "Constant" and node.attribute[0].name == "value":
        return numpy_helper.to_array(node.attribute[0].t)
    return None


def _leading_dims(name, initializers, producers):
    """`(x, tail)` when the shape tensor `name` is `x`'s first two dimensions followed by
    the constants `tail` (`Concat(Shape(x)[0:1], Shape(x)[1:2], *constants)`), else None."""
    node = producers.get(name)
    if node is not None and node.op_type == "Cast":
        node = producers.get(node.input[0])
    if node is None or node.op_type != "Concat" or len(node.input) < 3:
        return None
    sources = []
    for position, dim in enumerate(node.input[:2]):
        cut = producers.get(dim)
        if cut is None or cut.op_type != "Slice" or len(cut.input) < 4:
            return None
        bounds = [_constant(i, initializers, producers) for i in cut.input[1:4]]
        if any(b is None for b in bounds) or [int(np.ravel(b)[0]) for b in bounds] != [
            position,
            position + 1,
            0,
        ]:
            return None
        shape = producers.get(cut.input[0])
        if shape is not None and shape.op_type == "Cast":
            shape = producers.get(shape.input[0])
        if shape is None or shape.op_type != "Shape" or shape.attribute:
            return None
        sources.append(shape.input[0])
    tail = [_constant(i, initializers, producers) for i in node.input[2:]]
    if sources[0] != sources[1] or any(t is None for t in tail):
        return None
    return sources[0], [int(v) for t in tail for v in np.ravel(t)]


# Operators that act on each row alone, as on each position of a sequence: a chain of
# them between a flattening reshape and the reshape back computes the same without both.
_ROW_WISE = {"MatMul", "Add", "Sub", "Mul", "Div", "Erf", "Relu", "Tanh", "Sigmoid"}


def _rows_chain(name, x, initializers, producers):
    """`(flat, nodes)` when the tensor `name` is computed from `x` flattened to rows by
    one `Reshape` (`flat`, to a constant `[-1, d]`) through row-wise `nodes` only (each
    `MatMul` by a constant matrix), else None."""
    nodes, flats, todo = {}, {}, [name]
    while todo:
        name = todo.pop()
        node = producers.get(name)
        if _constant(name, initializers, producers) is not None or id(node) in nodes:
            continue
        if node is None:
            return None
        if node.op_type == "Reshape":
            shape = _constant(node.input[1], initializers, producers)
            if node.input[0] != x or shape is None or np.size(shape) != 2:
                return None
            if int(np.ravel(shape)[0]) != -1:
                return None
            flats[id(node)] = node
            continue
        if node.op_type not in _ROW_WISE:
            return None
        if node.op_type == "MatMul":
            weight = _constant(node.input[1], initializers, producers)
            if weight is None or weight.ndim != 2:
                return None
        nodes[id(node)] = node
        todo.extend(node.input)
    return (next(iter(flats.values())), nodes) if len(flats) == 1 else None


def _static_projection_shapes(graph, initializers, producers, consumers):
    """A projection of a sequence (`EinsumDense`, tf2onnx's einsum; the feed-forward
    net on rows) flattens `x` to a matrix, multiplies (and adds, and activates), and
    reshapes back to a shape computed from `x` at run time; both reshapes become
    constant shapes (`[0, 0, -1]`, `[0, 0, *tail]`: 0 copies the batch and length; a
    reshape back to `[0, 0, n]` does nothing and goes), so the shape arithmetic is
    pruned. A flattening reshape is changed only when everything
    reading it, and everything between it and the reshapes back, is rewritten."""
    from onnx import numpy_helper

    found = collections.defaultdict(list)  # flattening Reshape -> [(Reshape back, tail, nodes)]
    for node in graph.node:
        parsed = node.op_type == "Reshape" and _leading_dims(node.input[1], initializers, producers)
        chain = parsed and _rows_chain(node.input[0], parsed[0], initializers, producers)
        if chain:
            found[id(chain[0])].append((chain[0], node, parsed[1], chain[1]))
    rewritten, outputs = 0, {v.name for v in graph.output}
    for chains in found.values():
        flat = chains[0][0]
        inside = {key: n for _, _, _, nodes in chains for key, n in nodes.items()}
        allowed = set(inside) | {id(back) for _, back, _, _ in chains}
        readers = [
            n for node in [flat, *inside.values()] for o in node.output for n in consumers[o]
        ]
        if not {id(n) for n in readers} <= allowed:
            continue
        for _, back, tail, _ in chains:
            if len(tail) == 1 and back.output[0] not in outputs:  # [0, 0, n]: a no-op
                for reader in consumers[back.output[0]]:
                    reader.input[:] = [
                        back.input[0] if i == back.output[0] else i for i in reader.input
                    ]
                continue  # `back` is read no more: pruned
            name = f"{back.name}/static_shape"
            graph.initializer.append(numpy_helper.from_array(np.array([0, 0, *tail]), name))
            back.input[1] = name
        rewritten += 1
        name = f"{flat.name}/static_shape"
        graph.initializer.append(numpy_helper.from_array(np.array([0, 0, -1]), name))
        flat.input[1] = name
    return rewritten


def _scopes(nodes, marker):
    """`{scope: nodes}` of the nodes whose name holds `marker` (`scope` ends before it)."""
    found = collections.defaultdict(list)
    for node in nodes:
        if marker in node.name:
            found[node.name.split(marker)[0] + marker.rstrip("/")].append(node)
    return found


def _index(graph):
    """`(initializers, producers, consumers)` of `graph`: `{name: tensor}`, `{output:
    node}`, `{input: [nodes]}`."""
    initializers = {t.name: t for t in graph.initializer}
    producers = {o: node for node in graph.node for o in node.output}
    consumers = collections.defaultdict(list)
    for node in graph.node:
        for name in node.input:
            consumers[name].append(node)
    return initializers, producers, consumers


def simplified(model):
    """`model` (tf2onnx's, modified in place and returned) with layer norms, exact GELUs
    and sequence `Dense` layers as ONNX Runtime's fusions and kernels expect them."""
    from onnx import helper

    graph = model.graph
    initializers, producers, consumers = _index(graph)
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
    for erf in [n for n in graph.node if n.op_type == "Erf" and id(n) not in dropped]:
        new, new_tensors, replaced = _erf_gelu_nodes(erf, initializers, producers, consumers)
        dropped.update(id(n) for n in replaced)
        added += new
        tensors += new_tensors
    kept = [node for node in graph.node if id(node) not in dropped] + added
    graph.initializer.extend(tensors)
    _sort_and_prune(graph, kept)
    _static_projection_shapes(graph, *_index(graph))
    _sort_and_prune(graph, list(graph.node))
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
