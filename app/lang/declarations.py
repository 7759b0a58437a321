"""The declarations of a pipeline: its cluster, barriers, stages, tensors and tensor memory,
folded over the parameter values into the engine's declarations (`app.sim.program`)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from math import prod

from app.sim.barrier import COUNT_LIMIT
from app.sim.core import TILE_SPAN
from app.sim.program import BarrierDecl, StageDecl

from . import syntax
from .errors import ParamError, PipelineError
from .exprs import Scope, constant
from .limits import (
    MAX_BARRIERS,
    MAX_CHUNKS,
    MAX_CLUSTER,
    MAX_ELEMENTS,
    MAX_STAGES,
    PARAM_LIMIT,
)
from .loader import Pipeline
from .syntax import Array, Name


@dataclass(frozen=True)
class ArrayDecl:
    kind: str
    name: str
    base: int
    """Flat index of element 0 in CTA 0 (tensors: the tile id of element 0)."""
    size: int
    """Elements per CTA."""
    indexed: bool
    ctas: int = 1
    """Copies in the cluster: barriers and stages exist once per CTA, tensors once."""
    shape: tuple[int, ...] = ()
    """A tensor map's extent in elements per dimension, innermost first (else empty)."""
    box: tuple[int, ...] = ()
    """A tensor map's bounding box in elements per dimension: one tile is one box."""
    box_bytes: int = 0
    """A tensor map's bytes per box (its tile size)."""



def cluster_shape(pipeline: Pipeline, constants: dict) -> tuple[int, int]:
    """The cluster's CTAs in x and y (`cluster X, Y;`; `cluster N;` is N x 1; none is 1 x 1)."""
    shapes = [c for c in pipeline.module.items if isinstance(c, syntax.Cluster)]
    if len(shapes) > 1:
        raise PipelineError("`cluster` is declared twice", shapes[1].pos.line,
                            shapes[1].pos.column)
    if not shapes:
        return 1, 1
    decl = shapes[0]
    where = (decl.pos.line, decl.pos.column)
    scope = Scope(constants, {})
    dims = [constant(d, scope, "a cluster's size") for d in decl.dims]
    for node, value in zip(decl.dims, dims, strict=True):
        if value < 1:
            raise _limit(node, f"a cluster dimension is at least 1; got {value}", where,
                         "cluster")
    x, y = (*dims, 1)[:2]
    if x * y > MAX_CLUSTER:
        node = next((d for d in decl.dims if isinstance(d, Name)), None)
        shape = " x ".join(str(v) for v in dims)
        raise _limit(node, f"a cluster has 1 to {MAX_CLUSTER} CTAs here; {shape} makes "
                           f"{x * y}", where, "cluster")
    return x, y


def cluster_constants(shape: tuple[int, int]) -> dict[str, int]:
    """What every agent and declaration may read of the cluster: its size, and PTX's special
    registers of its shape (PTX 10.15, 10.17)."""
    x, y = shape
    return {"cluster_size": x * y, "%cluster_nctarank": x * y, "%cluster_nctaid.x": x,
            "%cluster_nctaid.y": y, "%cluster_nctaid.z": 1}


def cta_constants(shape: tuple[int, int], rank: int) -> dict[str, int]:
    """One CTA's place in the cluster: its rank (`cta`, PTX's `%cluster_ctarank`, 10.16) and
    its `%cluster_ctaid` (10.14), x varying fastest (CUDA's `cluster.block_rank()`)."""
    x = shape[0]
    return {"cta": rank, "%cluster_ctarank": rank, "%cluster_ctaid.x": rank % x,
            "%cluster_ctaid.y": rank // x, "%cluster_ctaid.z": 0}


def declarations(pipeline: Pipeline, constants: dict, ctas: int):
    arrays: dict[str, ArrayDecl] = {}
    barriers: list[BarrierDecl] = []
    stages: list[StageDecl] = []
    tensors: list[tuple[str, int, int]] = []
    tmems: list[str] = []
    decls = [d for d in pipeline.module.items if isinstance(d, Array)]
    scope = Scope(constants, {})
    order = {"barrier": 0, "smem": 1, "tensor": 2, "tmem": 3}
    for decl in sorted(decls, key=lambda d: order[d.kind]):
        where = (decl.pos.line, decl.pos.column)
        if decl.name in arrays or decl.name in constants:
            raise PipelineError(f"`{decl.name}` is declared twice", *where)
        size = 1 if decl.dim is None else constant(decl.dim, scope, "an array's size")
        shape, box, box_bytes = (), (), 0
        if decl.box:
            shape, box, size, box_bytes = _tensor_map(decl, scope, where)
        copies = ctas if decl.kind in ("barrier", "smem") else 1
        limit = {"barrier": (MAX_BARRIERS - len(barriers)) // copies,
                 "smem": (MAX_STAGES - len(stages)) // copies,
                 "tensor": MAX_ELEMENTS, "tmem": 1}[decl.kind]
        if not 1 <= size <= limit:
            raise _limit(decl.dim, f"`{decl.name}` has {size} elements; the limit here is "
                                   f"{limit}", where, decl.kind)
        base = {"barrier": len(barriers), "smem": len(stages),
                "tensor": len(tensors) * TILE_SPAN, "tmem": len(tmems)}[decl.kind]
        arrays[decl.name] = ArrayDecl(decl.kind, decl.name, base, size,
                                      decl.dim is not None or bool(box), copies, shape, box,
                                      box_bytes)
        for cta in range(copies):
            prefix = f"cta{cta}." if copies > 1 else ""
            names = ([prefix + decl.name] if decl.dim is None
                     else [f"{prefix}{decl.name}[{i}]" for i in range(size)])
            if decl.kind == "barrier":
                count = None
                if decl.init is not None:
                    count = constant(decl.init, scope, "an init count")
                    if not 1 <= count <= COUNT_LIMIT:
                        raise _limit(decl.init, f"an mbarrier's init count is 1..{COUNT_LIMIT}; "
                                                f"`{decl.name}` gets {count}", where, "count")
                barriers.extend(BarrierDecl(n, decl.name, count, cta) for n in names)
            elif decl.kind == "smem":
                made = _stages(decl, names, scope, arrays, where, cta)
                if decl.at is not None:
                    made = _view(decl, made, stages, arrays, where, cta)
                stages.extend(made)
        if decl.kind == "tensor":
            nbytes = constant(decl.bytes, scope, "a tensor's element size")
            if box:
                nbytes = box_bytes
            tensors.append((decl.name, size, nbytes))
        elif decl.kind == "tmem":
            tmems.append(decl.name)
    return arrays, barriers, stages, tensors, tmems


ELEMENT_BYTES = (1, 2, 4, 8)
"""The element sizes of a tensor map's data types (CUDA's `CUtensorMapDataType`)."""
BOX_LIMIT = 256
"""Elements of a bounding box per dimension (CUDA's `cuTensorMapEncodeTiled`: boxDim <= 256)."""


def _tensor_map(decl: Array, scope, where) -> tuple[tuple, tuple, int, int]:
    """A tensor map's shape and box (PTX 5.5.3.1: the box is a multiple of 16 bytes), its
    number of tiles and the bytes of one. The boxes tile the tensor from coordinate 0, one tile
    per box; the last along a dimension reaches past the extent where the box does not divide
    it, and a copy fills those elements (PTX 5.5.3.3)."""
    shape = tuple(constant(e, scope, "a tensor's extent") for e in decl.shape.items)
    box = tuple(constant(e, scope, "a bounding box's size") for e in decl.box.items)
    if not 1 <= len(shape) <= 5 or len(box) != len(shape):
        raise PipelineError(f"a tensor map has 1 to 5 dimensions, as many in its box as in its "
                            f"shape; `{decl.name}` has {len(shape)} and {len(box)}",
                            decl.box.pos.line, decl.box.pos.column)
    for node, value in zip(decl.shape.items, shape, strict=True):
        if not 1 <= value <= PARAM_LIMIT:
            raise _limit(node, f"an extent is 1..{PARAM_LIMIT}; got {value}", where, "shape")
    for node, value in zip(decl.box.items, box, strict=True):
        if not 1 <= value <= BOX_LIMIT:
            raise _limit(node, f"a box has 1..{BOX_LIMIT} elements per dimension; got {value}",
                         where, "box")
    elem = constant(decl.bytes, scope, "a tensor's element size")
    if elem not in ELEMENT_BYTES:
        raise _limit(decl.bytes, f"an element is 1, 2, 4 or 8 bytes; got {elem}", where, "elem")
    nbytes = prod(box) * elem
    if nbytes % 16:
        raise _limit(decl.box, f"a bounding box is a multiple of 16 bytes (PTX 5.5.3.1); "
                               f"{' x '.join(map(str, box))} x {elem} bytes is {nbytes}",
                     where, "box")
    tiles = prod(-(-n // b) for n, b in zip(shape, box, strict=True))
    if tiles > MAX_ELEMENTS:
        raise _limit(decl.shape, f"`{decl.name}` has {tiles} boxes; the limit is "
                                 f"{MAX_ELEMENTS}", where, "tensor")
    return shape, box, tiles, nbytes


def _stages(decl: Array, names, scope, arrays, where, cta: int) -> list[StageDecl]:
    nbytes = constant(decl.bytes, scope, "a stage's size")
    chunk = constant(decl.chunk, scope, "a stage's chunk size")
    for node, value in ((decl.bytes, nbytes), (decl.chunk, chunk)):
        if value < 16 or value % 16:
            raise _limit(node, f"sizes must be positive multiples of 16 bytes (TMA copies move "
                               f"16-byte units); got {value}", where, "bytes")
    if nbytes % chunk:
        raise _limit(decl.chunk, f"the chunk ({chunk}) must divide the stage's {nbytes} bytes",
                     where, "chunk")
    if nbytes // chunk > MAX_CHUNKS:
        raise _limit(decl.chunk, f"a stage has at most {MAX_CHUNKS} chunks; {nbytes} / {chunk} "
                                 f"= {nbytes // chunk}", where, "chunk")
    release = None
    if decl.release is not None:
        guard = arrays.get(decl.release)
        if guard is None or guard.kind != "barrier":
            raise PipelineError(f"`release {decl.release}`: no barrier array of that name",
                                *where)
        if guard.size != len(names):
            raise PipelineError(f"`{decl.release}` has {guard.size} barriers for "
                                f"{len(names)} stages", *where)
        release = guard.base + cta * guard.size
    return [StageDecl(n, decl.name, i, nbytes, chunk, None if release is None else release + i,
                      cta) for i, n in enumerate(names)]


def _view(decl: Array, made: list, stages: list, arrays: dict, where, cta: int) -> list:
    """`smem o[N] bytes B chunk C at q;`: o's stages lie over q's bytes from q's first byte
    (q's stages end to end, one region per CTA), as the members of a C++ union do. Both
    views keep their own names and tiles; writing through one changes the other's bytes."""
    root = arrays.get(decl.at)
    if root is None or root.kind != "smem" or decl.at == decl.name:
        raise PipelineError(f"`at {decl.at}`: no smem array of that name declared before "
                            f"`{decl.name}`", *where)
    first = root.base + cta * root.size
    if stages[first].alias is not None and stages[first].alias[2]:
        raise PipelineError(f"`at {decl.at}`: `{decl.at}` is itself a view; name the array it "
                            "views", *where)
    base_stages = stages[first:first + root.size]
    region = sum(s.bytes for s in base_stages)
    chunk = base_stages[0].chunk_bytes
    if made[0].chunk_bytes != chunk:
        raise PipelineError(f"`{decl.name}` views `{decl.at}`, whose chunks are {chunk} bytes; "
                            f"its own are {made[0].chunk_bytes}", *where,
                            hint="views of the same bytes track them in the same chunks")
    size = sum(s.bytes for s in made)
    if size > region:
        raise PipelineError(f"`{decl.name}` has {size} bytes; `{decl.at}` has {region}", *where,
                            hint="a view lies inside the bytes it views")
    offset = 0
    for k, stage in enumerate(base_stages):
        stages[first + k] = replace(stage, alias=(first, offset, False))
        offset += stage.bytes
    out, offset = [], 0
    for stage in made:
        out.append(replace(stage, alias=(first, offset, True)))
        offset += stage.bytes
    return out


def _limit(node, message: str, where, field: str) -> Exception:
    """A size error: a `ParamError` naming the parameter when the size is one, else a
    `PipelineError` at the declaration."""
    if isinstance(node, Name):
        return ParamError(node.name, message)
    return PipelineError(message, *where, limit=field)
