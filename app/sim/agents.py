"""The agents of a pipeline as small programs: the producer warp, consumer warps, the MMA issuer,
the epilogue and the SMEM writer threads, each a list of PTX- or CUTLASS-level lines.

The programs follow CUTLASS's `PipelineTmaAsync` (`producer_acquire`, `consumer_wait`,
`consumer_release`, `PipelineState`) and the PTX spellings of the operations they issue. A bug
toggle changes the program itself (a line disappears, or an operand is wrong), so the UI shows
students the very code that fails. Each line has a `kind` that the machine dispatches on; the loop
body runs once per tile and ends with an `advance` line (`++pipe_state`): next tile.
"""

from __future__ import annotations

from dataclasses import dataclass

from .config import PipelineConfig


@dataclass(frozen=True, slots=True)
class Instr:
    """One program line: what the machine does (`kind`), the PTX op it records, the text shown."""

    kind: str
    op: str
    text: str


@dataclass(frozen=True, slots=True)
class AgentSpec:
    """An agent's fixed description: its program and where its per-tile loop starts."""

    name: str
    role: str
    program: tuple[Instr, ...]
    loop_start: int
    consumer_bit: int = 0
    """Bit this agent clears in a tile's owed mask when it releases the tile (0: none)."""


ADVANCE_TEXT = "++pipe_state;  // index = (index + 1) % stages; phase ^= (index == 0)"
ADVANCE_TEXT_NO_TOGGLE = "++pipe_state;  // BUG: index wraps but phase is never flipped"


def _advance(forget_toggle: bool) -> Instr:
    text = ADVANCE_TEXT_NO_TOGGLE if forget_toggle else ADVANCE_TEXT
    return Instr("advance", "++pipe_state", text)


def producer_program(cfg: PipelineConfig) -> tuple[Instr, ...]:
    """`producer_acquire`, then one TMA load per tile into the stage's buffer."""
    expect = _announced_bytes(cfg)
    lines = []
    if not cfg.has("producer_skips_empty_wait"):
        lines.append(Instr(
            "wait_empty", "mbarrier.try_wait.parity",
            "producer_acquire: mbarrier.try_wait.parity empty_barrier[index], phase;",
        ))
    lines.append(Instr(
        "arrive_expect_tx", "mbarrier.arrive.expect_tx",
        f"mbarrier.arrive.expect_tx full_barrier[index], {expect};"
        + _expect_comment(cfg),
    ))
    lines.append(Instr(
        "tma_load", "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes",
        f"cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes "
        f"smem[index], tile[count], {cfg.tile_bytes}, full_barrier[index];",
    ))
    lines.append(_advance(cfg.has("forget_producer_phase_toggle")))
    return tuple(lines)


def _announced_bytes(cfg: PipelineConfig) -> int:
    if cfg.has("expect_tx_short"):
        return cfg.tile_bytes - cfg.chunk_bytes
    if cfg.has("expect_tx_long"):
        return cfg.tile_bytes + cfg.chunk_bytes
    return cfg.tile_bytes


def _expect_comment(cfg: PipelineConfig) -> str:
    if cfg.has("expect_tx_short"):
        return f"  // BUG: the tile is {cfg.tile_bytes} bytes"
    if cfg.has("expect_tx_long"):
        return f"  // BUG: the tile is {cfg.tile_bytes} bytes"
    return ""


def ring_consumer_program(cfg: PipelineConfig) -> tuple[Instr, ...]:
    """`consumer_wait`, read the tile, store it out with TMA, then `consumer_release`."""
    lines = [
        Instr("wait_full", "mbarrier.try_wait.parity",
              "consumer_wait: mbarrier.try_wait.parity full_barrier[index], phase;"),
        Instr("read", "ld.shared", "ld.shared  tile <- smem[index];  // use the tile"),
        Instr("tma_store", "cp.async.bulk.global.shared::cta.bulk_group",
              f"cp.async.bulk.global.shared::cta.bulk_group out[count], smem[index], "
              f"{cfg.tile_bytes};"),
        Instr("bulk_commit", "cp.async.bulk.commit_group", "cp.async.bulk.commit_group;"),
        Instr("bulk_wait_read", "cp.async.bulk.wait_group.read",
              "cp.async.bulk.wait_group.read 0;  // the store has read smem[index]"),
    ]
    if not cfg.has("consumer_skips_release"):
        lines.append(Instr("release", "mbarrier.arrive",
                           "consumer_release: mbarrier.arrive empty_barrier[index];"))
    lines.append(_advance(cfg.has("forget_phase_toggle")))
    return tuple(lines)


def mma_program(cfg: PipelineConfig) -> tuple[Instr, ...]:
    """The MMA issuer: wait for a stage, issue an MMA on it, commit to release the stage."""
    commit = not cfg.has("missing_mma_commit")
    lines = [
        Instr("wait_full", "mbarrier.try_wait.parity",
              "consumer_wait: mbarrier.try_wait.parity full_barrier[index], phase;"),
        Instr("mma", "tcgen05.mma.cta_group::1",
              "tcgen05.mma.cta_group::1.kind::f16 [tmem_acc], smem[index].a, smem[index].b;"),
    ]
    if commit:
        lines.append(Instr(
            "mma_commit_empty", "tcgen05.commit.cta_group::1.mbarrier::arrive::one",
            "tcgen05.commit.cta_group::1.mbarrier::arrive::one empty_barrier[index];"
            "  // consumer_release",
        ))
    lines.append(_advance(cfg.has("forget_phase_toggle")))
    if commit:
        lines.append(Instr(
            "mma_commit_accum", "tcgen05.commit.cta_group::1.mbarrier::arrive::one",
            "tcgen05.commit.cta_group::1.mbarrier::arrive::one accum_full_barrier;",
        ))
    else:
        lines.append(Instr(
            "nop", "// tcgen05.commit missing",
            "// BUG: no tcgen05.commit: the MMAs finish but arrive on no barrier",
        ))
    return tuple(lines)


def epilogue_program(cfg: PipelineConfig) -> tuple[Instr, ...]:
    return (
        Instr("wait_accum", "mbarrier.try_wait.parity",
              "mbarrier.try_wait.parity accum_full_barrier, 0;"),
        Instr("tmem_ld", "tcgen05.ld", "tcgen05.ld.sync.aligned.32x32b  regs <- [tmem_acc];"),
        Instr("st_global", "st.global", "st.global  out <- regs;"),
    )


def single_thread_program(cfg: PipelineConfig) -> tuple[Instr, ...]:
    """The seed lesson: one thread drives one barrier through `tiles` phases by hand."""
    lines = [
        Instr("init", "mbarrier.init", "mbarrier.init.shared::cta.b64 [bar], 1;"),
        Instr("arrive_expect_tx", "mbarrier.arrive.expect_tx",
              f"mbarrier.arrive.expect_tx.shared::cta.b64 _, [bar], {_announced_bytes(cfg)};"
              + _expect_comment(cfg)),
        Instr("tma_load", "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes",
              f"cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes "
              f"[smem], [tile + i], {cfg.tile_bytes}, [bar];"),
        Instr("wait_full", "mbarrier.try_wait.parity",
              "mbarrier.try_wait.parity.shared::cta.b64 p, [bar], phase;"),
        Instr("read", "ld.shared", "ld.shared  x <- [smem];  // use the tile"),
    ]
    if cfg.has("forget_phase_toggle"):
        lines.append(Instr("advance", "i += 1",
                           "i += 1;  // BUG: phase ^= 1 is missing"))
    else:
        lines.append(Instr("advance", "phase ^= 1", "phase ^= 1; i += 1;"))
    return tuple(lines)


def writer_program(cfg: PipelineConfig) -> tuple[Instr, ...]:
    """Threads fill a staging buffer with st.shared and a TMA store writes it out."""
    lines = [
        Instr("bulk_wait_read", "cp.async.bulk.wait_group.read",
              f"cp.async.bulk.wait_group.read {cfg.stages - 1};  // smem[index] is free again"),
        Instr("write", "st.shared", "st.shared  smem[index] <- tile[count];  // generic proxy"),
    ]
    if not cfg.has("missing_proxy_fence"):
        lines.append(Instr("proxy_fence", "fence.proxy.async.shared::cta",
                           "fence.proxy.async.shared::cta;  // make it visible to the TMA"))
    lines += [
        Instr("tma_store", "cp.async.bulk.global.shared::cta.bulk_group",
              f"cp.async.bulk.global.shared::cta.bulk_group out[count], smem[index], "
              f"{cfg.tile_bytes};"),
        Instr("bulk_commit", "cp.async.bulk.commit_group", "cp.async.bulk.commit_group;"),
        Instr("advance", "index = (index + 1) % stages",
              "index = (index + 1) % stages; count += 1;"),
        Instr("bulk_wait_all", "cp.async.bulk.wait_group",
              "cp.async.bulk.wait_group 0;  // every store has completed"),
    ]
    return tuple(lines)


def build_agents(cfg: PipelineConfig) -> tuple[AgentSpec, ...]:
    """The agents of `cfg.pipeline`, in the fixed order moves are numbered in."""
    if cfg.pipeline == "single_barrier":
        return (AgentSpec("thread", "thread", single_thread_program(cfg), 1, consumer_bit=1),)
    if cfg.pipeline == "tma_ring":
        consumers = tuple(
            AgentSpec(f"consumer{c}", "consumer", ring_consumer_program(cfg), 0,
                      consumer_bit=1 << c)
            for c in range(cfg.consumers)
        )
        return (AgentSpec("producer", "producer", producer_program(cfg), 0),) + consumers
    if cfg.pipeline == "kloop_mma":
        return (
            AgentSpec("producer", "producer", producer_program(cfg), 0),
            AgentSpec("mma", "mma", mma_program(cfg), 0, consumer_bit=1),
            AgentSpec("epilogue", "epilogue", epilogue_program(cfg), 0),
        )
    if cfg.pipeline == "proxy_store":
        return (AgentSpec("writer", "writer", writer_program(cfg), 0),)
    raise ValueError(f"unknown pipeline {cfg.pipeline!r}")
