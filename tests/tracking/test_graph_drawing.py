"""graph.dot / graph.svg: the operator drawn for a person (input, weights, primitives, output, legend).

The DOT is parsed by Graphviz itself (``graphviz.Source(...).pipe(format="json0")``), so the checks see the graph
that ``dot`` draws, not a regex over the text."""
from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

import pytest

from syno_automl import OperatorSpace, known
from syno_automl.tracking import render_svg

graphviz = pytest.importorskip("graphviz")

INTERNAL_NAMES = ("ShareL", "ShareR", "Iterator", "MergeL", "MergeR", "FINALIZE")
PRIMITIVES = ("REDUCE", "SPLIT", "MERGE", "SHIFT", "STRIDE", "UNFOLD", "EXPAND", "CONTRACTION")


def parsed(dot: str) -> dict[str, Any]:
    """Nodes (name -> attributes) and edges (tail name, head name, attributes) as Graphviz reads the DOT."""
    data = json.loads(graphviz.Source(dot).pipe(format="json0"))
    objects = data.get("objects", [])
    names = [o["name"] for o in objects]
    edges = [(names[e["tail"]], names[e["head"]], e) for e in data.get("edges", [])]
    return {"graph": data, "nodes": {o["name"]: o for o in objects}, "edges": edges}


def components(nodes: dict[str, Any], edges: list[tuple[str, str, Any]]) -> int:
    parent = {n: n for n in nodes}

    def root(n: str) -> str:
        while parent[n] != n:
            parent[n] = parent[parent[n]]
            n = parent[n]
        return n

    for a, b, _ in edges:
        parent[root(a)] = root(b)
    return len({root(n) for n in nodes})


def sizes(label: str) -> list[str]:
    return [s.strip() for s in label.split(",") if s.strip()]


def shape_of(spec: str) -> list[str]:
    return sizes(spec.strip()[1:-1])


def weight_shapes(op) -> list[list[str]]:
    """Each weight's symbolic shape, from the operator's text description (``w0 [C_out, C_in, k, k]``)."""
    return [sizes(m.group(2)) for m in re.finditer(r"\bw(\d+) \[([^\]]*)\]", str(op))]


def check_drawing(op, input_spec: str, output_spec: str) -> dict[str, Any]:
    dot = op.graphviz()
    for name in INTERNAL_NAMES:
        assert not re.search(rf"\b{name}\b", dot), f"internal name {name} drawn"
    g = parsed(dot)
    nodes, edges = g["nodes"], g["edges"]
    by_class = Counter(n.get("class") for n in nodes.values())
    weights = weight_shapes(op)
    assert by_class["input"] == 1 and by_class["output"] == 1
    assert by_class["weight"] == len(weights) == len(op.program(0)["weights"])
    assert by_class["primitive"] == op.depth, (by_class, op.primitives)
    assert set(nodes) == {"x", "y", *(f"w{k}" for k in range(len(weights))),
                          *(n for n, o in nodes.items() if o.get("class") == "primitive")}
    assert components(nodes, edges) == 1
    # tensors labelled with their symbolic shapes
    assert nodes["x"]["label"] == f"input x\\n{input_spec}"
    assert nodes["y"]["label"] == f"output y\\n{output_spec}"
    for k, shape in enumerate(weights):
        assert nodes[f"w{k}"]["label"] == f"weight w{k}\\n[{', '.join(shape)}]"
    # primitives named as users know them, in forward order (op.primitives lists them bottom-up)
    prims = [o["label"].split("\\n")[0].split(" ")[0] for o in nodes.values() if o.get("class") == "primitive"]
    assert prims == [p.split(" ")[0] for p in op.primitives[::-1]]
    assert set(prims) <= set(PRIMITIVES)
    # every edge carries the sizes of its coordinates; what leaves a tensor is its shape, what reaches the
    # output is the output's shape (besides the dashed "reduced" edges of the REDUCEs)
    assert all(e.get("label") for _, _, e in edges)
    out_of = lambda n: Counter(s for a, _, e in edges if a == n for s in sizes(e["label"]))  # noqa: E731
    assert out_of("x") == Counter(shape_of(input_spec))
    for k, shape in enumerate(weights):
        assert out_of(f"w{k}") == Counter(shape)
        assert all(nodes[b]["label"].startswith(f"CONTRACTION with w{k}") for a, b, _ in edges if a == f"w{k}")
    into_y = Counter(s for _, b, e in edges if b == "y" and e["label"] != "reduced" for s in sizes(e["label"]))
    assert into_y == Counter(shape_of(output_spec))
    reduced = [a for a, b, e in edges if b == "y" and e["label"] == "reduced"]
    assert sorted(reduced) == sorted(n for n, o in nodes.items() if o["label"].startswith("REDUCE"))
    assert not [n for n in nodes if n != "y" and not any(a == n for a, _, _ in edges)], "a dead end"
    # the legend: the graph's own label (no node, so the operator stays one component), naming every primitive
    legend = g["graph"]["label"]
    assert "Legend" in legend and "input x" in legend and "weight w" in legend and "output y" in legend
    assert all(p in legend for p in set(prims))
    return g


CONV_SPACE = dict(input_shape="[N, C_in, H, W]", output_shape="[N, C_out, H, W]",
                  primary=["N: 0", "C_in: 2", "C_out: 2", "H: 2", "W: 2"])


@pytest.mark.parametrize("name, space_args, input_spec, output_spec", [
    ("conv2d", dict(**CONV_SPACE, coefficients=["k=3: 2"], mappings=[{"N": 2, "C_in": 3, "C_out": 5, "H": 7, "W": 6}],
                    max_depth=6), "[N, C_in, H, W]", "[N, C_out, H, W]"),
    ("grouped_conv2d", dict(**CONV_SPACE, coefficients=["k=3: 2", "g=2: 2"],
                            mappings=[{"N": 2, "C_in": 4, "C_out": 6, "H": 7, "W": 6}], max_depth=8),
     "[N, C_in, H, W]", "[N, C_out, H, W]"),
    ("depthwise_conv2d", dict(input_shape="[N, C, H, W]", output_shape="[N, C, H, W]",
                              primary=["N: 0", "C: 3", "H: 2", "W: 2"], coefficients=["k=3: 2"],
                              mappings=[{"N": 2, "C": 4, "H": 7, "W": 6}], max_depth=6),
     "[N, C, H, W]", "[N, C, H, W]"),
    ("avg_pool2d", dict(input_shape="[N, C, H, W]", output_shape="[N, C, s^-1*H, s^-1*W]",
                        primary=["N: 0", "C: 2", "H: 2", "W: 2"], coefficients=["s=2: 2"],
                        mappings=[{"N": 2, "C": 4, "H": 12, "W": 4}], max_depth=4, min_weights=0),
     "[N, C, H, W]", "[N, C, s^-1*H, s^-1*W]"),
    ("pixel_shuffle", dict(input_shape="[N, s^2*C, H, W]", output_shape="[N, C, s*H, s*W]",
                           primary=["N: 0", "C: 2", "H: 2", "W: 2"], coefficients=["s=2: 3"],
                           mappings=[{"N": 2, "C": 3, "H": 4, "W": 5}], max_depth=4, min_weights=0),
     "[N, s^2*C, H, W]", "[N, C, s*H, s*W]"),
    ("linear", dict(input_shape="[N, C_in]", output_shape="[N, C_out]", primary=["N: 0", "C_in: 2", "C_out: 2"],
                    mappings=[{"N": 3, "C_in": 5, "C_out": 7}], max_depth=3), "[N, C_in]", "[N, C_out]"),
])
def test_known_operators_are_drawn_readably(name, space_args, input_spec, output_spec) -> None:
    op = getattr(known, name)(OperatorSpace(**space_args))
    check_drawing(op, input_spec, output_spec)


def test_conv2d_drawing_reads_as_a_convolution() -> None:
    space = OperatorSpace(**CONV_SPACE, coefficients=["k=3: 2"],
                          mappings=[{"N": 2, "C_in": 3, "C_out": 5, "H": 7, "W": 6}], max_depth=6)
    g = check_drawing(known.conv2d(space), "[N, C_in, H, W]", "[N, C_out, H, W]")
    labels = sorted(o["label"] for o in g["nodes"].values() if o.get("class") == "primitive")
    assert labels == ["CONTRACTION with w0\\nSHARE C_in, k, k\\nouter C_out", "REDUCE C_in", "REDUCE k", "REDUCE k",
                      "UNFOLD window k", "UNFOLD window k"]
    edges = {(a, b): e["label"] for a, b, e in g["edges"]}
    assert edges[("w0", next(n for n, o in g["nodes"].items() if o["label"].startswith("CONTRACTION")))] \
        == "C_out, C_in, k, k"
    assert edges[("x", "y")] == "N"  # the batch passes straight through


def test_sampled_operators_are_drawn_readably() -> None:
    space = OperatorSpace(**CONV_SPACE, coefficients=["k=3: 2", "g=2: 2", "s=2: 2"],
                          mappings=[{"N": 2, "C_in": 8, "C_out": 8, "H": 8, "W": 8}], max_depth=8,
                          max_counts={"EXPAND": 2})
    ops = space.sample(16, seed=3)
    assert len(ops) >= 8
    seen = Counter()
    for op in ops:
        check_drawing(op, "[N, C_in, H, W]", "[N, C_out, H, W]")
        seen.update(p.split(" ")[0] for p in op.primitives)
    assert len(seen) >= 4, seen  # the sample exercises several primitives, not only contractions


def test_a_partial_node_is_drawn_too() -> None:
    space = OperatorSpace("[N, C_in]", "[N, C_out]", ["N: 0", "C_in: 2", "C_out: 2"], [],
                          [{"N": 3, "C_in": 5, "C_out": 7}], max_depth=3)
    node = space.root()
    for _ in range(2):
        node = next(c for c in node.children() if not c.is_final)
        g = parsed(node._native.graphviz())
        assert components(g["nodes"], g["edges"]) == 1
        assert "not final" in g["nodes"]["x"]["label"]


def test_the_svg_renders() -> None:
    space = OperatorSpace(**CONV_SPACE, coefficients=["k=3: 2"],
                          mappings=[{"N": 2, "C_in": 3, "C_out": 5, "H": 7, "W": 6}], max_depth=6)
    dot = known.conv2d(space).graphviz()
    svg = render_svg(dot)
    assert svg is not None and svg.lstrip().startswith("<?xml") and "<svg" in svg
    for text in ("input x", "[N, C_in, H, W]", "weight w0", "[C_out, C_in, k, k]", "output y", "CONTRACTION with w0",
                 "UNFOLD window k", "Legend"):
        assert text in svg, text
    assert svg == graphviz.Source(dot).pipe(format="svg", encoding="utf-8")  # the library call, unchanged
