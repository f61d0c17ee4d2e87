"""A model of PyTorch's CUDA caching allocator: reserved as a function of the
allocation sequence, and the OOM diagnosis of seed 004 §04.3.

What is modelled, with its source — ``c10/cuda/CUDACachingAllocator.cpp``
(PyTorch main, read 2026; the constants have been stable since PyTorch 1.x):

- **Rounding** (``round_size``): every request is rounded up to a multiple of
  ``kMinBlockSize`` = 512 B (at least 512 B). The ``roundup_power2_divisions``
  option is not modelled (off by default).
- **Two pools** (``get_pool``): requests of at most ``kSmallSize`` = 1 MiB go
  to the small pool, larger ones to the large pool; pools are per stream —
  a free block is only reused by a request on the stream that allocated it
  (``get_free_block``: ``(*it)->stream != p.stream()`` fails the search).
- **Segment sizes** (``get_allocation_size``): a small request gets a 2 MiB
  segment (``kSmallBuffer``); a request of 1–10 MiB a 20 MiB segment
  (``kLargeBuffer``; below ``kMinLargeAlloc`` = 10 MiB); a larger one a
  segment rounded up to 2 MiB (``kRoundLarge``).
- **Best fit and splitting** (``get_free_block``, ``should_split``): the
  smallest cached block of the stream's pool that fits is taken (ties: lowest
  address); it is split when the remainder is at least 512 B (small pool) or
  more than 1 MiB (large pool); otherwise the request keeps the whole block.
  ``max_split_size_mb`` is unset (default), so every large block may split.
- **Free and coalesce** (``free_block``, ``try_merge_blocks``): a freed block
  goes back to its pool and merges with free neighbours of the same segment.
  Nothing is returned to the driver: reserved only rises — the staircase of
  seed 004 §01 — until a segment is wholly free *and* memory runs out
  (``release_cached_blocks``, also ``torch.cuda.empty_cache``).
- **Out of memory** (``malloc``): when cudaMalloc of a new segment would pass
  the device capacity, every wholly free cached segment is released and the
  cudaMalloc retried once; if it still does not fit, OOM.

Not modelled: expandable segments, CUDA-graph private pools, cross-stream
``record_stream`` events (a freed block is reusable at once), the garbage
collection threshold, the allocator's own bookkeeping. ``allocated`` counts
block sizes (rounded), as ``torch.cuda.memory_allocated`` does.
"""
from __future__ import annotations

import heapq
from bisect import bisect_left, insort
from dataclasses import dataclass, field

kMinBlockSize = 512  # all sizes are rounded to at least 512 bytes
kSmallSize = 1048576  # largest "small" allocation is 1 MiB
kSmallBuffer = 2097152  # "small" allocations are packed in 2 MiB blocks
kMinLargeAlloc = 10485760  # allocations between 1 and 10 MiB may use kLargeBuffer
kLargeBuffer = 20971520  # "large" allocations may be packed in 20 MiB blocks
kRoundLarge = 2097152  # round up large allocations to 2 MiB


def round_size(size: int) -> int:
    """``round_size``: up to a multiple of 512 B, at least 512 B."""
    if size < kMinBlockSize:
        return kMinBlockSize
    return kMinBlockSize * ((size + kMinBlockSize - 1) // kMinBlockSize)


def pool_of(rounded: int) -> str:
    """``get_pool``: ``small`` up to 1 MiB, else ``large``."""
    return "small" if rounded <= kSmallSize else "large"


def allocation_size(rounded: int) -> int:
    """``get_allocation_size``: the segment cudaMalloc'd for a request that no cached block fits."""
    if rounded <= kSmallSize:
        return kSmallBuffer
    if rounded < kMinLargeAlloc:
        return kLargeBuffer
    return kRoundLarge * ((rounded + kRoundLarge - 1) // kRoundLarge)


def should_split(pool: str, block_size: int, rounded: int) -> bool:
    remaining = block_size - rounded
    return remaining >= kMinBlockSize if pool == "small" else remaining > kSmallSize


class OutOfMemory(Exception):
    """The modelled allocator ran out of device memory; ``diagnosis`` says which case."""

    def __init__(self, diagnosis: "Diagnosis"):
        super().__init__(diagnosis.message)
        self.diagnosis = diagnosis


@dataclass(eq=False)  # identity: a block is the one in its segment's list (found by `is`, not by its fields)
class Block:
    segment: "Segment"
    offset: int
    size: int
    allocated: bool = False
    requested: int = 0


@dataclass(eq=False)
class Segment:
    address: int
    size: int
    stream: int
    pool: str
    blocks: list[Block] = field(default_factory=list)

    def wholly_free(self) -> bool:
        return len(self.blocks) == 1 and not self.blocks[0].allocated


@dataclass(frozen=True)
class Diagnosis:
    """Seed 004 §04.3. Case A: the bytes are not there — allocated plus the
    request exceeds what the device has, however the pool is arranged.
    Case B: they are there (free cached bytes + device free >= request) but
    not as one block on the requesting stream: the reserved staircase,
    fragmentation from shape changes, or a pool split across streams; recompute
    would not help. ``largest_free_block`` is the largest cached block the
    request's stream and pool could use."""

    case: str
    request: int
    allocated: int
    reserved: int
    capacity: int
    free_cached: int
    largest_free_block: int
    free_on_other_streams: int
    message: str


def diagnose(request: int, allocated: int, reserved: int, capacity: int, largest_free_block: int = 0,
             free_on_other_streams: int = 0) -> Diagnosis:
    """Case A or B for a request that failed (sizes in bytes)."""
    free_cached = reserved - allocated
    device_free = max(capacity - reserved, 0)
    if free_cached + device_free < request:
        case = "A"
        why = (f"allocated {allocated:,} B + request {request:,} B exceed capacity {capacity:,} B: the peak itself "
               "is too high; shrink the largest class at the peak (recompute, sharding)")
    else:
        case = "B"
        causes = []
        if free_on_other_streams:
            causes.append(f"{free_on_other_streams:,} B free in other streams' pools")
        causes.append(f"largest usable cached block {largest_free_block:,} B")
        why = (f"{free_cached + device_free:,} B are free (cached {free_cached:,} B + device {device_free:,} B) but not "
               f"as one block: {'; '.join(causes)} — the reserved staircase / fragmentation; recompute will not help")
    return Diagnosis(case, request, allocated, reserved, capacity, free_cached, largest_free_block,
                     free_on_other_streams, f"case {case}: {why}")


class FreePool:
    """The free blocks of one (stream, pool), in ``get_free_block``'s order: by
    size, then address. Distinct sizes are few (a step repeats the same
    tensors layer after layer), so they are kept sorted, and the blocks of one
    size in a heap by address, removed lazily — O(log n) per free and malloc
    where a sorted list of every block was O(n) (a 10^5-layer step has 10^6)."""

    def __init__(self) -> None:
        self.sizes: list[int] = []              # sorted distinct sizes that have (or had) free blocks
        self.heaps: dict[int, list] = {}        # size -> heap of [address, order, block, valid]
        self.count: dict[int, int] = {}         # size -> free blocks of that size
        self.entry: dict[int, list] = {}        # id(block) -> its live heap entry
        self._order = 0

    def add(self, block: Block) -> None:
        size = block.size
        if size not in self.heaps:
            insort(self.sizes, size)
            self.heaps[size], self.count[size] = [], 0
        self._order += 1
        entry = [block.segment.address + block.offset, self._order, block, True]
        heapq.heappush(self.heaps[size], entry)
        self.entry[id(block)] = entry
        self.count[size] += 1

    def remove(self, block: Block) -> None:
        entry = self.entry.pop(id(block), None)
        if entry is None or entry[2] is not block:
            raise ValueError(f"block at {block.segment.address + block.offset} is not in the free list")
        entry[3] = False
        self.count[block.size] -= 1

    def _top(self, size: int) -> Block | None:
        heap = self.heaps[size]
        while heap and not heap[0][3]:
            heapq.heappop(heap)
        return heap[0][2] if heap else None

    def best_fit(self, rounded: int) -> Block | None:
        for index in range(bisect_left(self.sizes, rounded), len(self.sizes)):
            size = self.sizes[index]
            if self.count[size]:
                return self._top(size)
        return None

    def largest(self) -> int:
        return next((size for size in reversed(self.sizes) if self.count[size]), 0)

    def total(self) -> int:
        return sum(size * n for size, n in self.count.items())


@dataclass
class CachingAllocator:
    """The caching allocator of one device. ``capacity``: bytes cudaMalloc
    may hand out in all (``None``: unlimited)."""

    capacity: int | None = None
    segments: list[Segment] = field(default_factory=list)
    free_blocks: dict[tuple[int, str], "FreePool"] = field(default_factory=dict)
    live: dict[object, Block] = field(default_factory=dict)
    allocated: int = 0
    requested: int = 0
    reserved: int = 0
    peak_allocated: int = 0
    peak_reserved: int = 0
    _next_address: int = 0

    # -- pool bookkeeping: free blocks ordered by (size, address), per (stream, pool)
    def _add_free(self, stream: int, pool: str, block: Block) -> None:
        free = self.free_blocks.get((stream, pool))
        if free is None:
            free = self.free_blocks[(stream, pool)] = FreePool()
        free.add(block)

    def _remove_free(self, stream: int, pool: str, block: Block) -> None:
        self.free_blocks[(stream, pool)].remove(block)

    def _best_fit(self, stream: int, pool: str, rounded: int) -> Block | None:
        """The smallest free block of at least ``rounded`` bytes, lowest address on ties."""
        free = self.free_blocks.get((stream, pool))
        return free.best_fit(rounded) if free is not None else None

    def _cuda_malloc(self, stream: int, pool: str, size: int) -> Segment | None:
        if self.capacity is not None and self.reserved + size > self.capacity:
            return None
        segment = Segment(self._next_address, size, stream, pool)
        self._next_address += size
        segment.blocks.append(Block(segment, 0, size))
        self.segments.append(segment)
        self.reserved += size
        self.peak_reserved = max(self.peak_reserved, self.reserved)
        return segment

    def release_cached(self) -> int:
        """``release_cached_blocks`` / ``empty_cache``: cudaFree every wholly free segment."""
        released = 0
        for segment in [seg for seg in self.segments if seg.wholly_free()]:
            self._remove_free(segment.stream, segment.pool, segment.blocks[0])
            self.segments.remove(segment)
            self.reserved -= segment.size
            released += segment.size
        return released

    # -- the two calls ---------------------------------------------------------
    def malloc(self, key, size: int, stream: int = 0) -> Block:
        if key in self.live:
            raise ValueError(f"allocation {key!r} is already live")
        rounded = round_size(size)
        pool = pool_of(rounded)
        block = self._best_fit(stream, pool, rounded)
        if block is None:
            want = allocation_size(rounded)
            segment = self._cuda_malloc(stream, pool, want)
            if segment is None:
                self.release_cached()
                segment = self._cuda_malloc(stream, pool, want)
            if segment is None:
                raise OutOfMemory(self.diagnose(rounded, stream))
            block = segment.blocks[0]
        else:
            self._remove_free(stream, pool, block)
        if should_split(pool, block.size, rounded):
            segment = block.segment
            rest = Block(segment, block.offset + rounded, block.size - rounded)
            segment.blocks.insert(segment.blocks.index(block) + 1, rest)
            block.size = rounded
            self._add_free(stream, pool, rest)
        block.allocated, block.requested = True, size
        self.live[key] = block
        self.allocated += block.size
        self.requested += size
        self.peak_allocated = max(self.peak_allocated, self.allocated)
        return block

    def free(self, key) -> None:
        try:
            block = self.live.pop(key)
        except KeyError:
            raise ValueError(f"free of {key!r}, which is not live") from None
        segment = block.segment
        self.allocated -= block.size
        self.requested -= block.requested
        block.allocated, block.requested = False, 0
        index = segment.blocks.index(block)
        for neighbour_index in (index + 1, index - 1):  # try_merge_blocks with next, then prev
            if 0 <= neighbour_index < len(segment.blocks):
                other = segment.blocks[neighbour_index]
                if not other.allocated:
                    self._remove_free(segment.stream, segment.pool, other)
                    block.offset = min(block.offset, other.offset)
                    block.size += other.size
                    segment.blocks.remove(other)
                    index = segment.blocks.index(block)
        self._add_free(segment.stream, segment.pool, block)

    # -- reading the state -----------------------------------------------------
    def largest_free_block(self, stream: int, pool: str) -> int:
        free = self.free_blocks.get((stream, pool))
        return free.largest() if free is not None else 0

    def free_cached_on_other_streams(self, stream: int) -> int:
        return sum(free.total() for (st, _), free in self.free_blocks.items() if st != stream)

    def diagnose(self, request: int, stream: int = 0) -> Diagnosis:
        capacity = self.capacity if self.capacity is not None else self.reserved
        return diagnose(request, self.allocated, self.reserved, capacity,
                        self.largest_free_block(stream, pool_of(round_size(request))),
                        self.free_cached_on_other_streams(stream))


@dataclass(frozen=True)
class Step:
    """The state after one event of a sequence."""

    event: tuple
    allocated: int
    reserved: int


def replay(events, capacity: int | None = None, allocator: CachingAllocator | None = None) -> list[Step]:
    """Run an allocation sequence; reserved and allocated after each event.

    ``events``: ``("alloc", key, size[, stream])``, ``("free", key)``,
    ``("empty_cache",)`` or ``("mark", label, ...)`` (a label, no action).
    Raises :class:`OutOfMemory` (with its case A/B diagnosis) when the
    sequence does not fit in ``capacity``.
    """
    return list(_replay(events, capacity, allocator))


def _replay(events, capacity: int | None = None, allocator: CachingAllocator | None = None):
    """:func:`replay`, one :class:`Step` at a time (a long step is not held whole)."""
    alloc = allocator or CachingAllocator(capacity)
    for event in events:
        action = event[0]
        if action == "alloc":
            alloc.malloc(event[1], event[2], event[3] if len(event) > 3 else 0)
        elif action == "free":
            alloc.free(event[1])
        elif action == "empty_cache":
            alloc.release_cached()
        elif action != "mark":
            raise ValueError(f"unknown allocator event {action!r}; use alloc, free, empty_cache or mark")
        yield Step(tuple(event), alloc.allocated, alloc.reserved)


def reserved_at_marks(events, capacity: int | None = None) -> list[tuple[str, int, int]]:
    """(label, allocated, reserved) at each ``mark`` event of a timeline's
    :meth:`~symbolic.step.timeline.Timeline.allocation_events`."""
    return [(step.event[1], step.allocated, step.reserved) for step in _replay(events, capacity)
            if step.event[0] == "mark"]
