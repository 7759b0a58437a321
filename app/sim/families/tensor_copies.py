"""Tensor copies (PTX 9.1 section 9.7.9.27.1.2): `cp.async.bulk.tensor.{1..5}d` moves one
bounding box of a tensor map between global and shared memory.

A tensor map (`tensor A shape {K, M} box {64, 16} elem 2;`) cuts the tensor into boxes from
coordinate 0; one box is one tile. The copy's coordinates name the box's first element; the
bytes a load brings, and so the complete-tx it performs on its mbarrier, are the whole box's
(PTX: "completeCount equal to amount of data copied"), its elements outside the tensor included:
they are filled with zeros or OOB-NaN (5.5.3.3), not skipped. So a kernel that announces only
the in-bounds bytes of a box that crosses the tensor's edge announces too few
(mirage-project/mirage#705: 1,024 announced, 2,048 delivered). Everything after the issue is the
bulk copy's (families/copies.py): chunk landings, held complete-tx, multicast, the store's reads.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..family import Family
from ..isa import Form, Slot
from ..program import ProgramError
from . import copies

COORD_LIMIT = 2**31
"""Tensor coordinates are `.s32` (PTX 9.7.9.27.1.2)."""


@dataclass(frozen=True, slots=True)
class TensorBox:
    """What a copy needs of its tensor map (frozen data from the language's declaration)."""

    name: str
    base: int
    """The tile id of the map's first box."""
    shape: tuple[int, ...]
    box: tuple[int, ...]
    nbytes: int
    """The bytes of one box: every element of it, in bounds or not."""

    @property
    def grid(self) -> tuple[int, ...]:
        return tuple(-(-n // b) for n, b in zip(self.shape, self.box, strict=True))


def box_tile(box: TensorBox, coords: tuple[int, ...]) -> int:
    """The tile id of the box whose first element is at `coords`. A box at coordinates that are
    not a multiple of its size (it would straddle two tiles), or wholly outside the tensor, is
    not modelled: the run stops with `copy_shape`."""
    tile, stride = 0, 1
    for c, n, b, g in zip(coords, box.shape, box.box, box.grid, strict=True):
        if not -COORD_LIMIT <= c < COORD_LIMIT:
            raise ProgramError("operand_range", f"a tensor coordinate is .s32; got {c}")
        if c % b or not 0 <= c < n:
            raise ProgramError("copy_shape", f"the box of {box.name} at coordinates "
                                             f"{{{', '.join(map(str, coords))}}}: the engine "
                                             "models boxes that start at a multiple of the box "
                                             f"({' x '.join(map(str, box.box))}) inside the "
                                             f"tensor ({' x '.join(map(str, box.shape))})")
        tile += c // b * stride
        stride *= g
    return box.base + tile


def _load(m, a, r, args, record) -> None:
    dst, box, coords, bar, multicast = args
    tile = box_tile(box, tuple(c(r) for c in coords))
    copies.issue_load(m, a, r, dst(r), None, tile, box.nbytes, bar(r), multicast, record)
    record["operands"]["box"] = list(box.box)


def _store(m, a, r, args, record) -> None:
    box, coords, src = args
    tile = box_tile(box, tuple(c(r) for c in coords))
    copies.issue_store(m, a, r, tile, src(r), None, box.nbytes, record)
    record["operands"]["box"] = list(box.box)


# ------------------------------------------------------------------- the instruction table

def _isa_forms() -> tuple:
    """This family's rows of the instruction table (app/sim/isa.py), from the syntax block of
    PTX 9.1 section 9.7.9.27.1.2 (the `.tile` load mode; the others are refused)."""
    dim = Slot("dim", ("1d", "2d", "3d", "4d", "5d"), required=True,
               note="as many coordinates as the tensor map has dimensions")
    mode = Slot("load_mode", ("tile", "tile::gather4", "tile::scatter4", "im2col",
                              "im2col::w", "im2col::w::128", "im2col_no_offs"),
                modelled=("tile",), default="tile",
                note="the engine models `.tile` (the box as it is); gather, scatter and im2col "
                     "modes are not modelled")
    pair = Slot("cta_group", ("cta_group::1", "cta_group::2"), modelled=("cta_group::1",),
                default="cta_group::1", note="CTA pairs (`.cta_group::2`) are not modelled")
    hint = Slot("level::cache_hint", ("L2::cache_hint",),
                note="with its `cache-policy` operand: a performance hint only")
    multicast = Slot("multicast", ("multicast::cluster",),
                     note="with its `ctaMask` operand: one box lands in every CTA of the mask")
    completion = Slot("completion_mechanism", ("mbarrier::complete_tx::bytes", "bulk_group"),
                      required=True)
    slots = (dim, Slot("dst", ("shared::cluster", "shared::cta", "global"), required=True),
             Slot("src", ("global", "shared::cta"), required=True), mode, completion,
             multicast, pair, hint)
    release = (("sem", "release"), ("scope", "cluster"))
    lands = ("a bulk load of one box: lands chunk by chunk and completes tx of the whole box's "
             "bytes, its out-of-bounds fill included (PTX 5.5.3.3), on the barrier")
    return (
        Form("cp.async.bulk.tensor", "tensor_load",
             "[smem[i]], [tensorMap, {c0, ...}], [barrier] {, ctaMask} {, cache-policy}",
             "9.7.9.27.1.2", lands + "; `.shared::cluster` with `.multicast::cluster`: in "
             "every CTA of `ctaMask`",
             slots, where=(("dst", ("shared::cluster", "shared::cta")), ("src", ("global",)),
                           ("completion_mechanism", ("mbarrier::complete_tx::bytes",))),
             remote="the engine models tensor loads into the issuing CTA's stage (and, with "
                    "`.multicast::cluster`, the same stage of every CTA of the mask)",
             implied=release, positional=("dst", "src")),
        Form("cp.async.bulk.tensor", "tensor_store",
             "[tensorMap, {c0, ...}], [smem[i]] {, cache-policy}", "9.7.9.27.1.2",
             "a bulk store of one box: reads the stage chunk by chunk, then its writes land",
             slots, where=(("dst", ("global",)), ("src", ("shared::cta",)),
                           ("completion_mechanism", ("bulk_group",)), ("multicast", (None,)),
                           ("cta_group", (None,))),
             remote="a tensor store reads the executing CTA's own shared memory",
             positional=("dst", "src")),
    )


FAMILY = Family("tensor copies (app/sim/families/tensor_copies.py)", 25,
                {"tensor_load": _load, "tensor_store": _store}, forms=_isa_forms())
