"""The snapshot reader on files built in the test to PyTorch's documented
format (``torch.cuda.memory._snapshot`` docstring): allocated/reserved over
time, the peak and its lifetime classes, fragmentation, OOM case A/B, and
refusal of malicious, truncated and malformed files."""
import gzip
import json
import os
import pickle

import pytest

from symbolic.cli import main
from symbolic.step.snapshot import SnapshotError, analyse, from_allocator_events, load, loads

MiB = 2**20
A, B = 0x7F0000000000, 0x7F0002000000  # segment addresses


def frame(name, filename="model.py", line=1):
    return [{"filename": filename, "line": line, "name": name}]


def entry(action, addr, size, when, stream=0, frames=None):
    return {"action": action, "addr": addr, "size": size, "stream": stream, "time_us": when,
            "frames": frames or []}


def crafted() -> dict:
    """Weights (8 MiB) allocated before recording; then one step: a small activation, a 4 MiB
    activation, a 2 MiB kernel temporary freed at once, everything freed again."""
    trace = [
        entry("segment_alloc", B, 2 * MiB, 100),
        entry("alloc", B, 1000, 110, frames=frame("forward")),
        entry("alloc", A + 8 * MiB, 4 * MiB, 120, frames=frame("forward")),
        entry("alloc", A + 12 * MiB, 2 * MiB, 130, frames=frame("gelu_backward")),
        entry("free_requested", A + 12 * MiB, 2 * MiB, 131),
        entry("free_completed", A + 12 * MiB, 2 * MiB, 131),
        entry("free_requested", A + 8 * MiB, 4 * MiB, 140),
        entry("free_completed", A + 8 * MiB, 4 * MiB, 140),
        entry("free_requested", B, 1000, 150),
        entry("free_completed", B, 1000, 150),
    ]
    segments = [
        {"device": 0, "address": A, "total_size": 20 * MiB, "stream": 0, "segment_type": "large",
         "segment_pool_id": (0, 0), "allocated_size": 8 * MiB, "active_size": 8 * MiB, "requested_size": 8 * MiB,
         "blocks": [{"address": A, "size": 8 * MiB, "requested_size": 8 * MiB, "state": "active_allocated",
                     "frames": frame("__init__", "torch/nn/modules/linear.py")},
                    {"address": A + 8 * MiB, "size": 12 * MiB, "requested_size": 0, "state": "inactive",
                     "frames": []}]},
        {"device": 0, "address": B, "total_size": 2 * MiB, "stream": 0, "segment_type": "small",
         "segment_pool_id": (0, 0), "allocated_size": 0, "active_size": 0, "requested_size": 0,
         "blocks": [{"address": B, "size": 2 * MiB, "requested_size": 0, "state": "inactive", "frames": []}]},
    ]
    return {"segments": segments, "device_traces": [trace],
            "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "", "expandable_segments": False}}


def test_allocated_and_reserved_over_time():
    an = analyse(loads(pickle.dumps(crafted())), transient_allocs=0)
    base = 8 * MiB
    assert an.allocated == [base, base, base + 1000, 12 * MiB + 1000, 14 * MiB + 1000, 14 * MiB + 1000,
                            12 * MiB + 1000, 12 * MiB + 1000, base + 1000, base + 1000, base]
    assert an.reserved == [20 * MiB] + [22 * MiB] * 10
    assert an.times[:3] == [100.0, 100.0, 110.0]


def test_peak_breakdown_by_lifetime_class_and_fragmentation():
    an = analyse(loads(pickle.dumps(crafted())), transient_allocs=0)
    assert an.peak_index == 4 and an.peak_allocated == 14 * MiB + 1000
    assert an.breakdown == {"constant": 8 * MiB, "activations": 4 * MiB + 1000, "transients": 2 * MiB,
                            "communication": 0}
    assert an.fragmentation == 22 * MiB - (14 * MiB + 1000)
    assert an.largest_free_gap == 6 * MiB  # the tail of the 20 MiB segment
    assert an.ooms == []


def test_other_stream_is_communication():
    snap = crafted()
    snap["device_traces"][0][2]["stream"] = 7  # the 4 MiB allocation on a side stream ...
    snap["device_traces"][0][6]["stream"] = snap["device_traces"][0][7]["stream"] = 7
    an = analyse(loads(pickle.dumps(snap)), transient_allocs=0)
    assert an.breakdown["communication"] == 4 * MiB and an.main_stream == 0


def test_oom_case_b_from_a_fragmented_pool(tmp_path):
    events = [("alloc", (seg, k), 6 * MiB) for seg in range(5) for k in range(3)]
    events += [("free", (seg, k)) for seg in range(5) for k in (1, 2)] + [("alloc", "wide", 16 * MiB)]
    path = tmp_path / "oom.pickle"
    path.write_bytes(pickle.dumps(from_allocator_events(events, capacity=100 * MiB)))
    (index, d), = analyse(load(path)).ooms
    assert d.case == "B" and d.allocated == 30 * MiB and d.reserved == 100 * MiB
    assert d.largest_free_block == 14 * MiB


def test_oom_case_a(tmp_path):
    path = tmp_path / "oom.pickle.gz"
    path.write_bytes(gzip.compress(pickle.dumps(from_allocator_events(
        [("alloc", "w", 90 * MiB), ("alloc", "x", 20 * MiB)], capacity=100 * MiB))))
    (_, d), = analyse(load(path)).ooms
    assert d.case == "A"


class Malicious:
    def __init__(self, target):
        self.target = target

    def __reduce__(self):
        return (os.mkdir, (self.target,))


def test_malicious_pickle_is_refused_and_never_runs(tmp_path):
    target = tmp_path / "pwned"
    path = tmp_path / "evil.pickle"
    path.write_bytes(pickle.dumps({"segments": [], "device_traces": [], "x": Malicious(str(target))}))
    with pytest.raises(SnapshotError, match="refuses to load posix.mkdir"):
        load(path)
    assert not target.exists()


@pytest.mark.parametrize("data, message", [
    (pickle.dumps(crafted())[:200], "truncated"),
    (b"", "empty"),
    (b"segments,device_traces\n1,2\n", "not a pickle"),
    (gzip.compress(pickle.dumps(crafted()), mtime=0)[:50], "gzip stream is truncated"),
    (pickle.dumps([1, 2, 3]), "wrong structure: the pickle holds a list"),
    (pickle.dumps({"device_traces": []}), "has no 'segments'"),
    (pickle.dumps({"segments": [{"address": 1, "total_size": 2, "stream": 0, "blocks": [{"size": 1}]}]}),
     r"segments\[0\].blocks\[0\] has no 'state'"),
    (pickle.dumps({"segments": [], "device_traces": [[{"action": "alloc", "size": "big"}]]}),
     r"device_traces\[0\]\[0\]\['size'\] is str"),
])
def test_bad_files_give_one_clear_line(tmp_path, data, message):
    path = tmp_path / "bad.pickle"
    path.write_bytes(data)
    with pytest.raises(SnapshotError, match=message) as error:
        load(path)
    assert "\n" not in str(error.value) and str(path) in str(error.value)


def test_cli_snapshot(tmp_path, capsys):
    path = tmp_path / "step.pickle"
    path.write_bytes(pickle.dumps(crafted()))
    assert main(["snapshot", str(path), "--transient-allocs", "0", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["peak_allocated_bytes"] == 14 * MiB + 1000 and data["peak_by_class"]["transients"] == 2 * MiB
    assert main(["snapshot", str(path), "--compare", "gpt-7b", "--seq", "1024"]) == 0
    out = capsys.readouterr().out
    assert "compared with the engine's timeline of gpt-7b" in out and "no OOM recorded" in out


def test_cli_snapshot_bad_file_exit_2(tmp_path, capsys):
    path = tmp_path / "bad.pickle"
    path.write_bytes(pickle.dumps(crafted())[:100])
    assert main(["snapshot", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "truncated" in err and "Traceback" not in err
    assert main(["snapshot", str(tmp_path / "missing.pickle")]) == 2
    assert "no such file" in capsys.readouterr().err
