"""The caching-allocator model on crafted allocation sequences: rounding,
pools and segment sizes, the reserved staircase, and OOM case A vs case B
(seed 004 §01, §04.3; c10/cuda/CUDACachingAllocator.cpp)."""
import pytest

from symbolic.step.allocator import (CachingAllocator, OutOfMemory, allocation_size, diagnose, pool_of, replay,
                                round_size)

KiB, MiB = 2**10, 2**20


@pytest.mark.parametrize("size, rounded", [(1, 512), (512, 512), (513, 1024), (1000, 1024), (MiB + 1, MiB + 512)])
def test_round_size_to_512(size, rounded):
    assert round_size(size) == rounded


@pytest.mark.parametrize("rounded, pool, segment", [
    (512, "small", 2 * MiB), (MiB, "small", 2 * MiB),               # <= 1 MiB: a 2 MiB small segment
    (MiB + 512, "large", 20 * MiB), (10 * MiB - 512, "large", 20 * MiB),  # 1-10 MiB: a 20 MiB segment
    (10 * MiB, "large", 10 * MiB), (10 * MiB + 512, "large", 12 * MiB),   # >= 10 MiB: rounded up to 2 MiB
])
def test_pools_and_segment_sizes(rounded, pool, segment):
    assert pool_of(rounded) == pool
    assert allocation_size(rounded) == segment


def test_small_requests_pack_into_2_mib_segments():
    steps = replay([("alloc", k, 512 * KiB) for k in range(5)])
    assert [s.reserved for s in steps] == [2 * MiB] * 4 + [4 * MiB]
    assert steps[-1].allocated == 5 * 512 * KiB


def test_large_block_not_split_when_the_rest_is_at_most_1_mib():
    alloc = CachingAllocator()
    alloc.malloc("a", 19 * MiB + 512 * KiB)  # in a 20 MiB segment: 0.5 MiB left, not split
    assert alloc.allocated == 20 * MiB and alloc.reserved == 20 * MiB
    alloc.malloc("b", 2 * MiB)  # needs a new 20 MiB segment
    assert alloc.reserved == 40 * MiB and alloc.allocated == 22 * MiB  # b was split off its segment


def test_freed_block_is_reused_without_new_reserve():
    steps = replay([("alloc", "x", 30 * MiB), ("free", "x"), ("alloc", "y", 30 * MiB)])
    assert [s.reserved for s in steps] == [30 * MiB] * 3
    assert [s.allocated for s in steps] == [30 * MiB, 0, 30 * MiB]


def test_reserved_staircase_transient_peak_stays_reserved():
    """A transient peak raises reserved; free does not return it (seed 004 §01). A transient
    sharing a 20 MiB segment with a long-lived block cannot be returned even by empty_cache."""
    steps = replay([
        ("alloc", "long-lived", 2 * MiB),   # a 20 MiB segment
        ("alloc", "transient", 8 * MiB),    # the same segment
        ("free", "transient"),
        ("alloc", "spike", 30 * MiB),       # its own 30 MiB segment
        ("free", "spike"),
        ("empty_cache",),
    ])
    assert [s.allocated for s in steps] == [2 * MiB, 10 * MiB, 2 * MiB, 32 * MiB, 2 * MiB, 2 * MiB]
    assert [s.reserved for s in steps] == [20 * MiB, 20 * MiB, 20 * MiB, 50 * MiB, 50 * MiB, 20 * MiB]


def test_streams_do_not_share_cached_blocks():
    steps = replay([("alloc", "comm", 30 * MiB, 1), ("free", "comm"), ("alloc", "gemm", 30 * MiB, 0)])
    assert steps[-1].reserved == 60 * MiB  # the free 30 MiB of stream 1 is not reused by stream 0


def test_case_a_allocated_near_the_limit():
    with pytest.raises(OutOfMemory) as error:
        replay([("alloc", "weights", 90 * MiB), ("alloc", "activation", 20 * MiB)], capacity=100 * MiB)
    d = error.value.diagnosis
    assert d.case == "A"
    assert (d.allocated, d.reserved, d.request) == (90 * MiB, 90 * MiB, 20 * MiB)


def test_case_b_fragmentation_reserved_at_the_limit_allocated_well_below():
    # five 20 MiB segments each holding three 6 MiB blocks; free two of three in each:
    # 30 MiB allocated, 100 MiB reserved, free blocks of 14 MiB only.
    events = [("alloc", (seg, k), 6 * MiB) for seg in range(5) for k in range(3)]
    events += [("free", (seg, k)) for seg in range(5) for k in (1, 2)]
    alloc = CachingAllocator(100 * MiB)
    replay(events, allocator=alloc)
    assert (alloc.allocated, alloc.reserved) == (30 * MiB, 100 * MiB)
    with pytest.raises(OutOfMemory) as error:
        alloc.malloc("wide", 16 * MiB)
    d = error.value.diagnosis
    assert d.case == "B"
    assert d.free_cached == 70 * MiB and d.largest_free_block == 14 * MiB


def test_case_b_pool_split_across_streams():
    alloc = CachingAllocator(40 * MiB)
    replay([("alloc", "comm", 6 * MiB, 1), ("alloc", "act", 18 * MiB, 0)], allocator=alloc)
    with pytest.raises(OutOfMemory) as error:
        alloc.malloc("grad", 12 * MiB, 0)
    d = error.value.diagnosis
    assert d.case == "B" and d.free_on_other_streams == 14 * MiB


def test_out_of_memory_first_releases_wholly_free_segments():
    steps = replay([("alloc", "a", 60 * MiB), ("free", "a"), ("alloc", "b", 70 * MiB)], capacity=100 * MiB)
    assert steps[-1].reserved == 70 * MiB


def test_diagnose_directly():
    assert diagnose(10, allocated=95, reserved=95, capacity=100).case == "A"
    assert diagnose(10, allocated=60, reserved=100, capacity=100).case == "B"


def test_bad_sequences_are_refused():
    with pytest.raises(ValueError, match="not live"):
        replay([("free", "x")])
    with pytest.raises(ValueError, match="already live"):
        replay([("alloc", "x", 1), ("alloc", "x", 1)])
    with pytest.raises(ValueError, match="unknown allocator event"):
        replay([("malloc", "x", 1)])
