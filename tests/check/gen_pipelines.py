"""A generator of small pipelines beyond the textbook ring, for the oracle tests: a producer and
one or two consumers over a ring of stages, in a CTA or a 2x1 cluster, with one or two copies per
tile (two halves, on one barrier or on two), consumers that poll with `test_wait` in a `while`
loop, a consumer that leaves with `arrive_drop`, a closing handshake on state tokens, and at most
one mutation drawn from the mistakes real kernels make. Every program is small enough for the
brute force of tests/check/oracle.py (one landing per copy, at most three tiles, one stage
and two tiles in a cluster)."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

MUTATIONS = (
    "none",
    "consumer_forgets_phase",    # ++r without its phase flip
    "producer_forgets_phase",
    "skip_release",              # a consumer never arrives on the empty barrier
    "release_before_read",       # arrive on empty, then ld.shared: the producer may overwrite
    "skip_empty_wait",           # the producer loads without waiting for the empty barrier
    "expect_short",              # arrive.expect_tx announces less than the copies bring
    "empty_count_low",           # the empty barrier expects one arrival fewer
    "drop_as_arrive",            # the leaving consumer arrives instead of arrive_drop
    "local_release_only",        # a cluster consumer forgets the remote release
    "no_producer_tail",          # a cluster producer exits while its peer may still arrive
    "token_count_high",          # the closing handshake expects one arrival too many
    "poll_wrong_parity",         # a polling consumer waits for the other parity
)


@dataclass(frozen=True)
class Ring:
    cluster: int       # 1 or 2 CTAs
    stages: int
    tiles: int
    consumers: int     # 1 or 2 per CTA
    halves: int        # copies per tile: 1, or 2 halves
    two_barriers: bool  # the second half completes on its own barrier (a CTA, 2 halves)
    poll: bool         # consumers poll with test_wait in a while loop instead of try_wait
    drop: bool         # consumer1 leaves with arrive_drop after its first tile
    handshake: bool    # consumers close with an arrive and a token wait on `fin`
    mutation: str

    @property
    def loops(self) -> bool:
        return self.poll or self.handshake


@st.composite
def rings(draw) -> Ring:
    cluster = draw(st.sampled_from([1, 1, 2]))
    stages = draw(st.integers(1, 2 if cluster == 1 else 1))
    tiles = draw(st.integers(1, 3 if cluster == 1 else 2))
    consumers = draw(st.integers(1, 2 if cluster == 1 else 1))
    halves = draw(st.integers(1, 2)) if cluster == 1 else 1
    two_barriers = halves == 2 and draw(st.booleans())
    poll = draw(st.booleans())
    drop = consumers == 2 and tiles >= 2 and not two_barriers and draw(st.booleans())
    if drop and stages == 1 and draw(st.booleans()):
        tiles = 4  # a tile after consumer1 has gone, so the drop matters
    handshake = cluster == 1 and draw(st.booleans())
    allowed = [m for m in MUTATIONS if _applies(m, cluster, consumers, drop, handshake, poll,
                                                halves)]
    mutation = draw(st.sampled_from(allowed))
    return Ring(cluster, stages, tiles, consumers, halves, two_barriers, poll, drop, handshake,
                mutation)


CLUSTER_MUTATIONS = {"none", "skip_release", "release_before_read", "expect_short",
                     "local_release_only", "no_producer_tail"}
"""The others let a 2-CTA run go on past its first diagnostic through more states than the brute
force holds (over 150,000 with one stage and two tiles)."""


def _applies(m: str, cluster: int, consumers: int, drop: bool, handshake: bool, poll: bool,
             halves: int) -> bool:
    if cluster == 2 and m not in CLUSTER_MUTATIONS:
        return False
    return {"empty_count_low": consumers * cluster >= 2,
            "local_release_only": cluster == 2, "no_producer_tail": cluster == 2,
            "drop_as_arrive": drop, "token_count_high": handshake,
            "poll_wrong_parity": poll, "expect_short": True}.get(m, True)


def render(ring: Ring) -> str:
    """The pipeline text of one ring."""
    r = ring
    m = r.mutation
    tile = 1024 * r.cluster if r.cluster == 2 else 1024 * r.halves
    copy = tile // (r.cluster * r.halves)
    per_cta = r.consumers * r.cluster
    lines = []
    if r.cluster == 2:
        lines.append("cluster 2;")
    lines += [
        f"tensor  tile[{r.tiles}] bytes {tile};",
        f"smem    smem[{r.stages}] bytes {tile} chunk {copy} release empty_barrier;",
        f"barrier full_barrier[{r.stages}] = 1;",
    ]
    if r.two_barriers:
        lines.append(f"barrier half_barrier[{r.stages}] = 1;")
    empty = per_cta - (1 if m == "empty_count_low" else 0)
    lines.append(f"barrier empty_barrier[{r.stages}] = {empty};")
    if r.handshake:
        lines.append(f"barrier fin = {r.consumers + (1 if m == 'token_count_high' else 0)};")
    lines.append(_producer(r, tile, copy))
    lines.append(_consumer(r))
    return "\n".join(lines) + "\n"


def _producer(r: Ring, tile: int, copy: int) -> str:
    m = r.mutation
    announced = (copy if r.two_barriers else copy * r.halves * r.cluster) - (
        16 if m == "expect_short" else 0)
    body = [f"PipelineState<{r.stages}> w = make_producer_start_state();",
            f"for (int k = 0; k < {r.tiles}; ++k) {{"]
    if m == "skip_empty_wait":
        body.append("    mbarrier.arrive.expect_tx.shared::cta.b64 _, [full_barrier[w.index]], "
                    f"{announced};")
    else:
        body.append(f"    producer_acquire(w, {announced});")
    if r.two_barriers:
        body.append("    mbarrier.arrive.expect_tx.shared::cta.b64 _, [half_barrier[w.index]], "
                    f"{copy};")
    if r.cluster == 2:
        body.append("    cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
                    f".multicast::cluster [smem[w.index] + cta * {copy}], [tile[k]], {copy}, "
                    "[full_barrier[w.index]], 3;")
    else:
        for h in range(r.halves):
            bar = "half_barrier" if h == 1 and r.two_barriers else "full_barrier"
            offset = f" + {h * copy}" if h else ""
            body.append("    cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes "
                        f"[smem[w.index]{offset}], [tile[k]], {copy}, [{bar}[w.index]];")
    body.append("    ++w;" if m != "producer_forgets_phase" else
                f"    w.index = (w.index + 1) % {r.stages}; w.count += 1;")
    body.append("}")
    if r.cluster == 2 and m != "no_producer_tail":
        body.append(f"producer_tail(w, {r.stages});")
    return "agent producer {\n" + "".join(f"    {b}\n" for b in body) + "}"


def _consumer(r: Ring) -> str:
    m = r.mutation
    name = "consumer[2]" if r.consumers == 2 else "consumer"
    body = [f"PipelineState<{r.stages}> r;", "int ok = 0;", "int t = 0;"]
    bound = f"{r.tiles}"
    if r.drop:  # consumer1 reads its first tile, then takes one pass over the ring, dropping out
        bound = f"{r.tiles} + rank * ({min(r.tiles, 1 + r.stages)} - {r.tiles})"
    body.append(f"for (int k = 0; k < {bound}; ++k) {{")
    parity = "r.phase ^ 1" if m == "poll_wrong_parity" else "r.phase"
    if r.poll:
        body += ["    ok = 0;",
                 "    while (!ok) { mbarrier.test_wait.parity.shared::cta.b64 ok, "
                 f"[full_barrier[r.index]], {parity}; }}"]
    else:
        body.append("    consumer_wait(r);")
    if r.two_barriers:
        body.append("    mbarrier.try_wait.parity.shared::cta.b64 _, [half_barrier[r.index]], "
                    "r.phase;")
    release = ["    consumer_release(r);"]
    if r.cluster == 2 and m != "local_release_only":
        release.append("    mbarrier.arrive.release.cluster.shared::cluster.b64 _, "
                       "[mapa(empty_barrier[r.index], cta ^ 1)];")
    if m == "skip_release":
        release = []
    if r.drop:
        leave = ("consumer_release(r);" if m == "drop_as_arrive" else
                 "mbarrier.arrive_drop.shared::cta.b64 _, [empty_barrier[r.index]];")
        release = ["    if (rank == 1 && k >= 1) {", f"        {leave}", "    } else {",
                   *("    " + x for x in release), "    }"]
    read = "    ld.shared x, [smem[r.index]], tile[k];"
    body += [*release, read] if m == "release_before_read" else [read, *release]
    body.append("    ++r;" if m != "consumer_forgets_phase" else
                f"    r.index = (r.index + 1) % {r.stages}; r.count += 1;")
    body.append("}")
    if r.handshake:
        body += ["mbarrier.arrive.shared::cta.b64 t, [fin];",
                 "ok = 0;",
                 "while (!ok) { mbarrier.test_wait.shared::cta.b64 ok, [fin], t; }"]
    return f"agent {name} {{\n" + "".join(f"    {b}\n" for b in body) + "}"
