"""Reading ``torch.cuda.memory._dump_snapshot`` files, safely.

The format is PyTorch's documented one (``torch.cuda.memory._snapshot``
docstring; ``torch/csrc/cuda/memory_snapshot.cpp`` writes it)::

    {"segments": [{"address", "total_size", "stream", "segment_type",
                   "allocated_size", "active_size", "device", ...,
                   "blocks": [{"address", "size", "requested_size", "state",
                               "frames": [{"filename", "line", "name"}]}]}],
     "device_traces": [[{"action", "addr", "size", "stream", "time_us",
                         "frames", "device_free" (oom only)}]],
     "allocator_settings": {...}}

``segments`` is the allocator's state when the snapshot was taken;
``device_traces`` the last ``max_entries`` alloc/free events per device
(``torch.cuda.memory._record_memory_history``). The pickle holds only dicts,
lists, tuples, strings, numbers, booleans and None, so it is read with a
restricted unpickler that refuses every global — no class is ever imported
or called, whatever the file says (seed 004 §04.1; issue 5).

Not yet checked on a snapshot recorded on a real GPU: the reader follows the
documented format and is tested on files built to it.

Over time: the state before the first recorded event is found by walking the
trace backwards from the final state (as PyTorch's MemoryViz does), then the
trace is replayed forwards. ``allocated`` is the sum of the live
allocations' sizes as the trace records them (the requested sizes), released
at ``free_completed``; ``reserved`` the sum of segments (``segment_alloc`` /
``segment_free``, ``segment_map`` / ``segment_unmap``). PyTorch's allocator
records the requested size (``orig_size``) in ``alloc`` entries, so the
allocated line is the requested bytes, not ``memory_allocated()``'s rounded
block sizes. With expandable segments (``segment_map``/``segment_unmap``)
reserved is followed, but the largest-free-gap figure only knows segments
from ``segment_alloc`` and the final state.

Lifetime classes are inferred (:func:`classify`): a heuristic from streams,
stack frames and lifetimes, not a record of intent.
"""
from __future__ import annotations

import gzip
import io
import pickle
import zlib
from bisect import bisect_right
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

from .allocator import Diagnosis, diagnose, round_size

#: OOM events at more distinct allocator states than this get their case, not a free-block search.
MAX_OOM_STATES = 1000
LIVE_STATES = ("active_allocated", "active_awaiting_free", "active_pending_free")
BLOCK_STATES = LIVE_STATES + ("inactive",)
ACTIONS = ("alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "segment_map",
           "segment_unmap", "oom", "snapshot", "annotate")
CLASSES = ("constant", "activations", "transients", "communication")
COMM_FRAMES = ("nccl", "c10d", "processgroup", "distributed")
OPTIM_FRAMES = ("torch/optim",)


class SnapshotError(ValueError):
    """A file that is not a readable memory snapshot; the message is one line."""


class _RestrictedUnpickler(pickle.Unpickler):
    """Builds only the pickle protocol's own types: dict, list, tuple, str,
    bytes, int, float, bool, None (and sets). Any global — a class, a
    function, ``os.system`` — is refused before it is looked up."""

    def find_class(self, module, name):
        raise SnapshotError(f"refuses to load {module}.{name}: a memory snapshot holds only dicts, lists, "
                            "strings and numbers (the file is not a plain snapshot, or it is malicious)")

    def persistent_load(self, pid):
        raise SnapshotError("refuses a persistent id: a memory snapshot holds only dicts, lists, strings and numbers")


#: Caps on a snapshot: the file, and what its gzip stream may decompress to (checked while reading:
#: a gzip bomb stops at the cap, it is never inflated into memory). Real snapshots are megabytes to
#: a few hundred MB. ``SYMBOLIC_SNAPSHOT_MAX_BYTES`` raises both.
SNAPSHOT_MAX_BYTES = 4 * 2**30


def _max_bytes() -> int:
    import os

    text = os.environ.get("SYMBOLIC_SNAPSHOT_MAX_BYTES", "")
    return int(text) if text.isdigit() and int(text) > 0 else SNAPSHOT_MAX_BYTES


class _CappedReader(io.RawIOBase):
    """A file object that refuses to yield more than ``limit`` bytes in all: the
    unpickler (and gzip under it) stream through it, and a request past the cap —
    a decompression bomb, a string claiming 2^60 bytes — fails before it is read."""

    def __init__(self, stream, limit: int, name: str):
        super().__init__()
        self.stream, self.remaining, self.limit, self.name = stream, limit, limit, name

    def readable(self) -> bool:
        return True

    def _take(self, size: int) -> int:
        if size is None or size < 0 or size > self.remaining:
            size = self.remaining + 1
        return size

    def read(self, size: int = -1) -> bytes:
        data = self.stream.read(self._take(size))
        self.remaining -= len(data)
        if self.remaining < 0:
            raise SnapshotError(f"{self.name}: decompresses to more than {self.limit:,} B, the cap on a snapshot "
                                "(a gzip bomb, or set SYMBOLIC_SNAPSHOT_MAX_BYTES)")
        return data

    def readinto(self, buffer) -> int:
        data = self.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)

    def readline(self, size: int = -1) -> bytes:
        data = self.stream.readline(self._take(size))
        self.remaining -= len(data)
        if self.remaining < 0:
            raise SnapshotError(f"{self.name}: a line longer than the {self.limit:,} B cap on a snapshot")
        return data

    def peek(self, size: int = 1) -> bytes:  # pickle's C unpickler does not need it
        return b""


def _unpickle(stream, name: str) -> dict:
    """Unpickle from a binary stream (gzip detected from its first two bytes), capped and restricted."""
    limit = _max_bytes()
    head = stream.read(2)
    rest = io.BufferedReader(_Prefixed(head, stream))
    if head == b"\x1f\x8b":
        rest = gzip.GzipFile(fileobj=rest, mode="rb")
    reader = _CappedReader(rest, limit, name)
    try:
        first = reader.read(1)
        if not first:
            raise SnapshotError(f"{name}: the file is empty, not a pickle")
        if first != b"\x80":
            raise SnapshotError(f"{name}: not a pickle file (no pickle protocol marker 0x80 at the start; "
                                "torch.cuda.memory._dump_snapshot writes pickle protocol 2 or later)")
        obj = _RestrictedUnpickler(io.BufferedReader(_Prefixed(first, reader))).load()
    except SnapshotError as error:
        text = str(error)
        raise SnapshotError(text if text.startswith(name) else f"{name}: {text}") from None
    except (EOFError, zlib.error, gzip.BadGzipFile) as error:
        if head == b"\x1f\x8b":
            raise SnapshotError(f"{name}: the gzip stream is truncated or corrupt ({error})") from None
        raise SnapshotError(f"{name}: the pickle is truncated (it ends before its STOP opcode)") from None
    except pickle.UnpicklingError as error:
        text = str(error)
        if "truncated" in text:
            raise SnapshotError(f"{name}: the pickle is truncated ({text})") from None
        raise SnapshotError(f"{name}: not a pickle file ({text})") from None
    except MemoryError:
        raise SnapshotError(f"{name}: too large to hold in memory") from None
    except OSError as error:
        if head == b"\x1f\x8b":
            raise SnapshotError(f"{name}: the gzip stream is truncated or corrupt ({error})") from None
        raise SnapshotError(f"{name}: cannot read it ({error})") from None
    except Exception as error:  # noqa: BLE001 - e.g. a BUILD opcode on a dict (AttributeError): not a snapshot
        raise SnapshotError(f"{name}: not a readable pickle ({type(error).__name__}: {error})") from None
    validate(obj, name)
    return obj


class _Prefixed(io.RawIOBase):
    """``head`` then the rest of ``stream``: bytes already read to sniff the format, given back."""

    def __init__(self, head: bytes, stream):
        super().__init__()
        self.head, self.stream = head, stream

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if self.head:
            n = min(len(buffer), len(self.head))
            buffer[:n], self.head = self.head[:n], self.head[n:]
            return n
        data = self.stream.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)


def loads(data: bytes, name: str = "snapshot") -> dict:
    """Unpickle ``data`` (optionally gzip-compressed) safely and check its structure."""
    return _unpickle(io.BytesIO(data), name)


def load(path: str | Path) -> dict:
    """Read a snapshot file, streaming (a regular file only, within the caps);
    :class:`SnapshotError` (one line) if it is not one."""
    from ..core.inputs import InputError, clean, open_regular_file

    try:
        handle = open_regular_file(path, _max_bytes(), "snapshot file")
    except InputError as error:
        raise SnapshotError(str(error)) from None
    with handle:
        return _unpickle(handle, clean(path))


#: Every integer of a snapshot (an address, a size, a stream, a time) is a 64-bit word in PyTorch's
#: caching allocator; a larger one is refused before any arithmetic or printing (a 1-MB integer
#: made the text output convert a 2.4-million-digit number).
_WORD = 2**64


def _word(value, key, where, name) -> None:
    if type(value) is int and not -_WORD < value < _WORD:
        raise SnapshotError(f"{name}: wrong structure: {where}[{key!r}] is an integer of {value.bit_length():,} bits; "
                            "a snapshot's addresses, sizes and streams are 64-bit")


def _need(obj, key, kind, where, name):
    if not isinstance(obj, dict) or key not in obj:
        raise SnapshotError(f"{name}: wrong structure: {where} has no {key!r} (not a torch.cuda.memory snapshot)")
    value = obj[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        want = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise SnapshotError(f"{name}: wrong structure: {where}[{key!r}] is {type(value).__name__}, not {want}")
    _word(value, key, where, name)
    return value


def _optional(obj, key, kind, where, name):
    """A field that may be absent, but when present has the documented type (a null
    counts as absent: it is dropped, so the analysis's defaults apply)."""
    if key in obj and obj[key] is None:
        del obj[key]
    elif key in obj:
        value = obj[key]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            want = "/".join(k.__name__ for k in kinds)
            raise SnapshotError(f"{name}: wrong structure: {where}[{key!r}] is {type(value).__name__}, not {want}")
        _word(value, key, where, name)


def _size(obj, key, where, name) -> int:
    value = _need(obj, key, int, where, name)
    if value < 0:
        raise SnapshotError(f"{name}: wrong structure: {where}[{key!r}] is negative ({value})")
    return value


#: Trace actions that name an address (``addr``): every alloc/free and segment event.
ADDRESSED = ("alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "segment_map",
             "segment_unmap")


_ABSENT = object()


def _plain_entry(entry) -> bool:
    """A trace entry whose every field the analysis reads has its documented type
    (no nulls): the fast path of :func:`validate` (``type(x) is int`` refuses bools)."""
    if type(entry) is not dict:
        return False
    action, size = entry.get("action"), entry.get("size")
    if type(action) is not str or type(size) is not int or not 0 <= size < _WORD:
        return False
    if action in ADDRESSED and (type(entry.get("addr")) is not int or not 0 <= entry["addr"] < _WORD):
        return False
    stream, when = entry.get("stream", 0), entry.get("time_us", 0)
    frames, free = entry.get("frames", _ABSENT), entry.get("device_free", 0)
    return (type(stream) is int and -_WORD < stream < _WORD and (type(when) is int or type(when) is float)
            and -_WORD < when < _WORD and (frames is _ABSENT or type(frames) is list)
            and type(free) is int and -_WORD < free < _WORD)


def validate(obj, name: str = "snapshot") -> None:
    """Check the documented structure and the type of every field the analysis
    reads; the error names the first bad field."""
    if not isinstance(obj, dict):
        raise SnapshotError(f"{name}: wrong structure: the pickle holds a {type(obj).__name__}, not a snapshot dict "
                            "with 'segments' and 'device_traces'")
    segments = _need(obj, "segments", list, "the snapshot", name)
    traces = obj.get("device_traces", [])
    if not isinstance(traces, list):
        raise SnapshotError(f"{name}: wrong structure: 'device_traces' is {type(traces).__name__}, not list")
    for si, seg in enumerate(segments):
        where = f"segments[{si}]"
        _need(seg, "address", int, where, name)
        _size(seg, "total_size", where, name)
        _need(seg, "stream", int, where, name)
        _optional(seg, "device", int, where, name)
        for bi, block in enumerate(_need(seg, "blocks", list, where, name)):
            bwhere = f"{where}.blocks[{bi}]"
            _size(block, "size", bwhere, name)
            state = _need(block, "state", str, bwhere, name)
            if state not in BLOCK_STATES:
                raise SnapshotError(f"{name}: wrong structure: {bwhere} has state {state!r}; "
                                    f"expected one of {', '.join(BLOCK_STATES)}")
            _optional(block, "address", int, bwhere, name)
            _optional(block, "requested_size", int, bwhere, name)
            _optional(block, "frames", list, bwhere, name)
    for di, trace in enumerate(traces):
        if not isinstance(trace, list):
            raise SnapshotError(f"{name}: wrong structure: device_traces[{di}] is {type(trace).__name__}, not list")
        for ei, entry in enumerate(trace):
            if _plain_entry(entry):
                continue  # the usual entry, checked in one go; anything else gets the field-by-field checks
            where = f"device_traces[{di}][{ei}]"
            action = _need(entry, "action", str, where, name)
            _size(entry, "size", where, name)
            if action in ADDRESSED:
                _need(entry, "addr", int, where, name)
            _optional(entry, "stream", int, where, name)
            _optional(entry, "time_us", (int, float), where, name)
            _optional(entry, "frames", list, where, name)
            _optional(entry, "device_free", int, where, name)


# --- analysis ------------------------------------------------------------------

@dataclass
class Allocation:
    """One allocation seen in the snapshot: ``start``/``end`` are state
    indices (0 = before the first recorded event; ``None`` end = alive at
    the end)."""

    addr: int
    size: int
    stream: int
    frames: list
    start: int | None
    end: int | None = None
    cls: str = ""


@dataclass
class SnapshotAnalysis:
    device: int
    allocated: list[int]
    reserved: list[int]
    times: list[float]
    peak_index: int
    breakdown: dict[str, int]
    peak_allocations: list[Allocation]
    fragmentation: int
    largest_free_gap: int
    main_stream: int
    events: int
    ooms: list[tuple[int, Diagnosis]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def peak_allocated(self) -> int:
        return self.allocated[self.peak_index]

    @property
    def peak_reserved(self) -> int:
        return self.reserved[self.peak_index]

    @property
    def max_reserved(self) -> int:
        return max(self.reserved)


def _frame_text(frames) -> str:
    parts = []
    for frame in frames or []:
        if isinstance(frame, dict):
            parts.append(f"{frame.get('filename', '')}:{frame.get('name', '')}")
    return " ".join(parts).lower()


def classify(alloc: Allocation, main_stream: int, transient_allocs: int, allocs_between) -> str:
    """The lifetime class of an allocation, from its stream, frames and lifetime (a heuristic):

    communication — on a stream other than the main one, or allocated under
    NCCL / c10d frames; constant — never freed within the recorded trace;
    transients — freed within ``transient_allocs`` allocations of its own
    (a kernel's work tensor; optimizer temporaries are caught by their
    ``torch/optim`` frames too); activations — the rest (alive across many
    allocations, released within the step).
    """
    frames = _frame_text(alloc.frames)
    if alloc.stream != main_stream or any(word in frames for word in COMM_FRAMES):
        return "communication"
    if alloc.end is None:
        return "constant"
    if alloc.start is None:
        return "activations"
    if any(word in frames for word in OPTIM_FRAMES) or allocs_between(alloc.start, alloc.end) <= transient_allocs:
        return "transients"
    return "activations"


def analyse(snapshot: dict, device: int | None = None, transient_allocs: int = 16) -> SnapshotAnalysis:
    """Allocated and reserved over time, the peak and its breakdown by
    lifetime class, fragmentation at the peak, and any OOM's case A/B."""
    traces = snapshot.get("device_traces", [])
    if device is None:
        device = max(range(len(traces)), key=lambda k: len(traces[k])) if traces else 0
    elif device >= len(traces) and not any(seg.get("device", 0) == device for seg in snapshot["segments"]):
        raise SnapshotError(f"--device {device}: the snapshot has traces for "
                            + (f"devices 0..{len(traces) - 1}" if traces else "no device") + " and no segment of it")
    trace = traces[device] if device < len(traces) else []
    notes = []
    segments = [seg for seg in snapshot["segments"] if seg.get("device", device) == device]

    # Final state.
    live: dict[int, Allocation] = {}
    seg_live: dict[int, tuple[int, int]] = {}
    for seg in segments:
        seg_live[seg["address"]] = (seg["total_size"], seg["stream"])
        for block in seg["blocks"]:
            if block["state"] in LIVE_STATES:
                addr = block.get("address", seg["address"])
                live[addr] = Allocation(addr, block.get("requested_size", block["size"]), seg["stream"],
                                        block.get("frames", []), None)
    release = "free_completed" if any(e["action"] == "free_completed" for e in trace) else "free_requested"
    if trace and release == "free_requested":
        notes.append("the trace has no free_completed events: allocations end at free_requested")

    # Walk backwards to the state before the first event.
    allocated = sum(x.size for x in live.values())
    reserved = sum(size for size, _ in seg_live.values())
    initial_live = dict(live)
    initial_segments = dict(seg_live)
    for entry in reversed(trace):
        action, size = entry["action"], entry["size"]
        if action == "alloc":
            initial_live.pop(entry["addr"], None)
            allocated -= size
        elif action == release:
            initial_live[entry["addr"]] = Allocation(entry["addr"], size, entry.get("stream", 0),
                                                     entry.get("frames", []), None)
            allocated += size
        elif action in ("segment_alloc", "segment_map"):
            initial_segments.pop(entry["addr"], None)
            reserved -= size
        elif action in ("segment_free", "segment_unmap"):
            initial_segments[entry["addr"]] = (size, entry.get("stream", 0))
            reserved += size
    if allocated < 0 or reserved < 0:
        notes.append("the trace and the final state disagree (negative start): values are relative")

    # Replay forwards.
    live = {addr: Allocation(x.addr, x.size, x.stream, x.frames, None) for addr, x in initial_live.items()}
    seg_now = dict(initial_segments)
    records = list(live.values())
    alloc_series, reserved_series, times = [allocated], [reserved], [0.0]
    alloc_counts = [0]
    ooms_raw = []
    # The state at each OOM, taken during this one pass (not by replaying the prefix per OOM):
    # OOMs at the same state (no alloc/free/segment event between) share the free-block search.
    oom_states: dict[int, tuple] = {}
    version = 0
    seg_gap = dict(initial_segments)  # as the largest-gap figure knows segments: segment_alloc/free only
    for index, entry in enumerate(trace, start=1):
        action, size = entry["action"], entry["size"]
        if action == "alloc":
            record = Allocation(entry["addr"], size, entry.get("stream", 0), entry.get("frames", []), index)
            live[entry["addr"]] = record
            records.append(record)
            allocated += size
        elif action == release:
            record = live.pop(entry["addr"], None)
            if record is not None:
                record.end = index
            allocated -= size
        elif action in ("segment_alloc", "segment_map"):
            seg_now[entry["addr"]] = (size, entry.get("stream", 0))
            if action == "segment_alloc":
                seg_gap[entry["addr"]] = (size, entry.get("stream", 0))
            reserved += size
        elif action in ("segment_free", "segment_unmap"):
            seg_now.pop(entry["addr"], None)
            if action == "segment_free":
                seg_gap.pop(entry["addr"], None)
            reserved -= size
        elif action == "oom":
            ooms_raw.append((index, entry, version))
            if version not in oom_states and len(oom_states) < MAX_OOM_STATES:
                oom_states[version] = (list(live.values()), dict(seg_gap))
        if action != "oom":
            version += 1
        alloc_series.append(allocated)
        reserved_series.append(reserved)
        alloc_counts.append(alloc_counts[-1] + (action == "alloc"))
        times.append(float(entry.get("time_us", index)))
    if trace and "time_us" in trace[0]:
        times[0] = float(trace[0]["time_us"])

    def allocs_between(start, end):
        return alloc_counts[end] - alloc_counts[start]

    stream_bytes = Counter()
    for record in records:
        stream_bytes[record.stream] += record.size
    main_stream = stream_bytes.most_common(1)[0][0] if stream_bytes else 0
    for record in records:
        record.cls = classify(record, main_stream, transient_allocs, allocs_between)

    peak_index = max(range(len(alloc_series)), key=lambda k: (alloc_series[k], -k))
    at_peak = [r for r in records if (r.start or 0) <= peak_index and (r.end is None or r.end > peak_index)]
    breakdown = {cls: 0 for cls in CLASSES}
    for record in at_peak:
        breakdown[record.cls] += record.size
    segs_at_peak = _segments_at(trace, initial_segments, peak_index)
    gap = _largest_gap(segs_at_peak, at_peak)

    ooms = []
    searched: dict[tuple[int, int], tuple[int, int]] = {}
    for index, entry, state in ooms_raw:
        st = entry.get("stream", 0)
        capacity = reserved_series[index] + entry.get("device_free", 0)
        request = round_size(entry["size"])
        if state in oom_states:
            if (state, st) not in searched:
                alive, segs = oom_states[state]
                same = {a: v for a, v in segs.items() if v[1] == st}
                used_other = sum(r.size for r in alive if r.stream != st)
                free_other = max(sum(v[0] for v in segs.values() if v[1] != st) - used_other, 0)
                searched[(state, st)] = (_largest_gap(same, alive), free_other)
            gap, free_other = searched[(state, st)]
            ooms.append((index, diagnose(request, alloc_series[index], reserved_series[index], capacity, gap,
                                         free_other)))
        else:  # past the cap on distinct states: the case is exact, the block search is not run
            diagnosis = diagnose(request, alloc_series[index], reserved_series[index], capacity)
            ooms.append((index, replace(diagnosis, message=diagnosis.message.replace(
                "largest usable cached block 0 B", "largest usable cached block not searched"))))
    if len(oom_states) == MAX_OOM_STATES and any(state not in oom_states for _, _, state in ooms_raw):
        notes.append(f"more than {MAX_OOM_STATES:,} distinct allocator states at OOM events: beyond them the "
                     "largest free block is not searched (each OOM's case A/B is still exact)")
    return SnapshotAnalysis(device, alloc_series, reserved_series, times, peak_index, breakdown,
                            sorted(at_peak, key=lambda r: -r.size), reserved_series[peak_index] - alloc_series[peak_index],
                            gap, main_stream, len(trace), ooms, notes)


def _segments_at(trace, initial_segments, index) -> dict[int, tuple[int, int]]:
    segs = dict(initial_segments)
    for entry in trace[:index]:
        if entry["action"] == "segment_alloc":
            segs[entry["addr"]] = (entry["size"], entry.get("stream", 0))
        elif entry["action"] == "segment_free":
            segs.pop(entry["addr"], None)
    return segs


def _largest_gap(segments: dict[int, tuple[int, int]], alive: list[Allocation]) -> int:
    """The largest free range inside one segment, live allocations counted at
    their 512 B-rounded size (an upper bound: a block may be larger than its
    rounded request when the allocator did not split it)."""
    starts = sorted(segments)
    occupied: dict[int, list[tuple[int, int]]] = {a: [] for a in starts}
    for record in alive:
        k = bisect_right(starts, record.addr) - 1
        if k >= 0 and record.addr < starts[k] + segments[starts[k]][0]:
            occupied[starts[k]].append((record.addr, record.addr + round_size(record.size)))
    best = 0
    for start in starts:
        end = start + segments[start][0]
        cursor = start
        for lo, hi in sorted(occupied[start]):
            best = max(best, lo - cursor)
            cursor = max(cursor, hi)
        best = max(best, end - cursor)
    return best


# --- building snapshots (tests, notebook) -------------------------------------

def from_allocator_events(events, capacity: int | None = None, frames=None, time_step_us: int = 10) -> dict:
    """A snapshot dict in PyTorch's format, made by running ``events`` through
    the allocator model (:mod:`symbolic.step.allocator`): for tests and examples,
    never a substitute for a real recording. ``frames``: key -> frame list."""
    from .allocator import CachingAllocator, OutOfMemory

    alloc = CachingAllocator(capacity)
    trace = []
    frames = frames or {}
    clock = 0

    def record_segments(before: dict[int, int], stream: int) -> None:
        after = {seg.address: seg for seg in alloc.segments}
        for address in sorted(set(before) - set(after)):
            trace.append({"action": "segment_free", "addr": address, "size": before[address], "stream": stream,
                          "time_us": clock, "frames": []})
        for address in sorted(set(after) - set(before)):
            trace.append({"action": "segment_alloc", "addr": address, "size": after[address].size,
                          "stream": after[address].stream, "time_us": clock, "frames": []})

    for event in events:
        clock += time_step_us
        before = {seg.address: seg.size for seg in alloc.segments}
        if event[0] == "alloc":
            key, size = event[1], event[2]
            stream = event[3] if len(event) > 3 else 0
            try:
                block = alloc.malloc(key, size, stream)
            except OutOfMemory:
                record_segments(before, stream)
                trace.append({"action": "oom", "device_free": (capacity or 0) - alloc.reserved, "size": size,
                              "stream": stream, "time_us": clock, "frames": frames.get(key, [])})
                break
            record_segments(before, stream)
            trace.append({"action": "alloc", "addr": block.segment.address + block.offset, "size": size,
                          "stream": stream, "time_us": clock, "frames": frames.get(key, [])})
        elif event[0] == "free":
            block = alloc.live[event[1]]
            addr, size, stream = block.segment.address + block.offset, block.requested, block.segment.stream
            alloc.free(event[1])
            for action in ("free_requested", "free_completed"):
                trace.append({"action": action, "addr": addr, "size": size, "stream": stream,
                              "time_us": clock, "frames": frames.get(event[1], [])})
        elif event[0] == "empty_cache":
            alloc.release_cached()
            record_segments(before, 0)
    segments = []
    keys_by_block = {id(block): key for key, block in alloc.live.items()}
    for seg in alloc.segments:
        blocks = []
        for block in seg.blocks:
            key = keys_by_block.get(id(block))
            blocks.append({"address": seg.address + block.offset, "size": block.size,
                           "requested_size": block.requested if block.allocated else 0,
                           "state": "active_allocated" if block.allocated else "inactive",
                           "frames": frames.get(key, []) if block.allocated else []})
        segments.append({"device": 0, "address": seg.address, "total_size": seg.size, "stream": seg.stream,
                         "segment_type": seg.pool, "segment_pool_id": (0, 0),
                         "allocated_size": sum(b.size for b in seg.blocks if b.allocated),
                         "active_size": sum(b.size for b in seg.blocks if b.allocated),
                         "requested_size": sum(b.requested for b in seg.blocks if b.allocated),
                         "is_expandable": False, "frames": [], "blocks": blocks})
    return {"segments": segments, "device_traces": [trace],
            "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1,
                                   "garbage_collection_threshold": 0.0, "expandable_segments": False,
                                   "roundup_power2_divisions": {}}}
