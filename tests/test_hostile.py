"""The hostile corpus (issue 14): bad numbers, sizes, layouts, config files, snapshot files,
output paths and injection attempts against every command, run in-process through
``symbolic.cli.main``. Each must end as the CLI promises: exit 2 (1 for a failed check),
one line on stderr, no traceback, no "internal error", no control character from the input
on the terminal, no file written outside the named output, no marker file from an injection.
A few cases need a real process (broken pipe, /dev/full); hypothesis fuzzes the argument space.
Also: the parser walk of issue 13 (one vocabulary: the same flag has the same type and choices
in every command)."""
import gzip
import json
import os
import pickle
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from symbolic.cli import COMMANDS, build_parser, main

ROOT = Path(__file__).resolve().parent.parent
LLAMA = json.loads((ROOT / "symbolic/data/llama-2-7b.json").read_text())
LLAMA.pop("_symbolic")
MARKER = "PWNED"


def _pickle_build_on_dict() -> bytes:
    # PROTO 2, EMPTY_DICT, EMPTY_DICT, BUILD, STOP: "set the state" of a dict
    return b"\x80\x02}}b."


def _snapshot(trace=None, segments=None) -> dict:
    return {"segments": segments if segments is not None else [], "device_traces": [trace or []]}


class _Reduce:
    def __init__(self, call, args):
        self.call, self.args = call, args

    def __reduce__(self):
        return (self.call, self.args)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """The hostile files, made once."""
    d = tmp_path_factory.mktemp("corpus")
    marker = str(d / MARKER)

    def config(name, **changes):
        raw = dict(LLAMA, **changes)
        raw = {k: v for k, v in raw.items() if v is not ...}
        (d / f"{name}.json").write_text(json.dumps(raw))

    (d / "deep.json").write_text('{"a":' * 10000 + "1" + "}" * 10000)
    (d / "deep_list.json").write_text("[" * 5000 + "]" * 5000)
    (d / "list.json").write_text("[1, 2, 3]")
    (d / "empty.json").write_text("")
    (d / "text.json").write_text("not json at all")
    (d / "latin1.json").write_bytes(b'{"model_type": "llama\xff"}')
    (d / "nan.json").write_text(json.dumps(dict(LLAMA)).replace('"num_hidden_layers": 32', '"num_hidden_layers": NaN'))
    (d / "bigint.json").write_text(json.dumps(dict(LLAMA)).replace('"num_hidden_layers": 32',
                                                                   '"num_hidden_layers": ' + "9" * 5000))
    (d / "big.json").write_text(" " * (17 * 2**20) + "{}")
    os.symlink("/dev/zero", d / "zero.json")
    os.symlink(d / "missing-target.json", d / "dangling.json")
    os.mkfifo(d / "fifo.json")
    (d / "folder").mkdir()
    config("ansi", _name_or_path="\x1b[31mEVIL\x1b]0;title\x07\x1b[0m")
    config("markup", _name_or_path="[/oops][blink]", sliding_window=1024)  # rich markup in a name: text, not markup
    config("layers_huge", num_hidden_layers=10**30)
    config("layers_str", num_hidden_layers="32")
    config("layers_float", num_hidden_layers=32.5)
    config("layers_bool", num_hidden_layers=True)
    config("layers_zero", num_hidden_layers=0)
    config("layers_neg", num_hidden_layers=-4)
    config("hidden_huge", hidden_size=2**40, num_attention_heads=2**10)
    config("vocab_huge", vocab_size=10**12)
    config("heads_indivisible", num_attention_heads=7)
    config("kv_indivisible", num_key_value_heads=5)
    config("missing_hidden", hidden_size=...)
    config("experts_on_llama", num_local_experts=8, num_experts_per_tok=2)
    config("tied_str", tie_word_embeddings="yes")
    config("meta_str", _symbolic="x")
    config("seq_huge", max_position_embeddings=10**12)

    def snap(name, obj=None, raw=None):
        (d / f"{name}.pickle").write_bytes(raw if raw is not None else pickle.dumps(obj))

    alloc = {"action": "alloc", "addr": 4096, "size": 512, "stream": 0, "time_us": 1}
    snap("s_missing_addr", _snapshot([{"action": "alloc", "size": 512}]))
    snap("s_str_addr", _snapshot([dict(alloc, addr="0x1000")]))
    snap("s_str_size", _snapshot([dict(alloc, size="512")]))
    snap("s_neg_size", _snapshot([dict(alloc, size=-512)]))
    snap("s_list_time", _snapshot([dict(alloc, time_us=[1, 2])]))
    snap("s_str_stream", _snapshot([dict(alloc, stream="main")]))
    snap("s_frames_str", _snapshot([dict(alloc, frames="x")]))
    snap("s_map_no_addr", _snapshot([{"action": "segment_map", "size": 2**21}]))
    snap("s_oom_str_free", _snapshot([{"action": "oom", "size": 512, "device_free": "lots"}]))
    snap("s_seg_str_size", _snapshot(segments=[{"address": 0, "total_size": "2MiB", "stream": 0, "blocks": []}]))
    snap("s_block_str_addr", _snapshot(segments=[{"address": 0, "total_size": 2**21, "stream": 0, "blocks": [
        {"size": 512, "state": "active_allocated", "address": "0"}]}]))
    snap("s_block_state", _snapshot(segments=[{"address": 0, "total_size": 2**21, "stream": 0, "blocks": [
        {"size": 512, "state": "weird"}]}]))
    snap("s_seg_dev_str", _snapshot(segments=[{"address": 0, "total_size": 2**21, "stream": 0, "device": "0",
                                               "blocks": []}]))
    snap("s_traces_dict", {"segments": [], "device_traces": {"0": []}})
    snap("s_trace_int", {"segments": [], "device_traces": [5]})
    snap("s_entry_list", _snapshot([[1, 2]]))
    snap("s_top_list", [1, 2, 3])
    snap("s_top_none", None)
    snap("s_build", raw=_pickle_build_on_dict())
    snap("s_truncated", raw=pickle.dumps(_snapshot([alloc] * 50))[:60])
    snap("s_empty", raw=b"")
    snap("s_text", raw=b"segments,device_traces\n")
    snap("s_gzip_garbage", raw=b"\x1f\x8b" + b"\x00" * 64)
    snap("s_gzip_truncated", raw=gzip.compress(pickle.dumps(_snapshot([alloc] * 50)))[:40])
    # a gzip bomb: a valid pickle header, then a string that claims (and inflates to) 64 MiB;
    # the test lowers the cap to 1 MiB, so it must stop there
    bomb = b"\x80\x04\x8d" + (64 * 2**20).to_bytes(8, "little") + b"\x00" * (64 * 2**20)
    snap("s_bomb", raw=gzip.compress(bomb, compresslevel=9))
    snap("s_reduce_system", raw=pickle.dumps(_Reduce(os.system, (f"touch {marker}",))))
    snap("s_reduce_mkdir", raw=pickle.dumps({"segments": [], "x": _Reduce(os.mkdir, (marker,))}))
    snap("s_reduce_eval", raw=pickle.dumps(_Reduce(eval, (f"open({marker!r}, 'w')",))))
    snap("s_persistent", raw=b"\x80\x02X\x01\x00\x00\x00aQ.")  # BINPERSID
    snap("s_ok", _snapshot([alloc]))
    # nulls count as absent (the analysis's defaults), so this one is read: exit 0
    snap("s_nulls", _snapshot([dict(alloc, time_us=None, stream=None, frames=None),
                               {"action": "oom", "size": 2**30, "device_free": None}]))
    os.symlink("/dev/zero", d / "s_zero.pickle")
    os.mkfifo(d / "s_fifo.pickle")
    (d / "ro").mkdir()
    (d / "ro").chmod(0o555)
    return d


# (id, argv, exit codes): {d} is the corpus folder.
NUMBERS = ["0", "-1", "2.5", "1e400", "1e99999999", "nan", "inf", "99999999999999999999999", "", "0x10", "٣", "1_0"]
LAYOUT_FLAGS = ["--tp", "--pp", "--dp", "--cp", "--micro-batch", "--seq", "--interleave", "--global-batch"]
SIZES = ["1e400GB", "1e99999999GB", "nanGB", "infGB", "80", "80 gigs", "-80GB", "0GB", "0.5B", "1e-400GB",
         "99999999999999999999999999EB", "80GB; touch PWNED", "$(touch PWNED)GB", "", "GB"]
COUNTS = ["1e400", "1e99999999", "nan", "-7B", "0", "7.5", "lots", "1e17", "`touch PWNED`", "7BB", "1e-9999"]

CASES = []
for flag in LAYOUT_FLAGS:
    for value in NUMBERS:
        CASES.append((f"bill{flag}={value!r}", ["bill", "gpt-7b", flag, value], {2}))
for command, extra in (("plan", ["--gpus", "64", "--gpu-memory", "80GB"]),
                       ("solve", ["--max", "micro-batch", "--gpu-memory", "80GB"]),
                       ("timeline", []), ("calculator", ["-o", "calc.html"])):
    model = ["--model", "gpt-7b"] if command == "calculator" else ["gpt-7b"]
    for flag in ("--tp", "--seq", "--micro-batch"):
        for value in ("0", "1e400", "nan", "99999999999999999999999"):
            CASES.append((f"{command}{flag}={value}", [command, *model, *extra, flag, value], {2}))
for size in SIZES:
    CASES.append((f"bill--gpu-memory={size!r}", ["bill", "gpt-7b", "--gpu-memory", size], {2}))
for count in COUNTS:
    CASES.append((f"bill--params={count!r}", ["bill", "gpt-7b", "--params", count], {2}))
    CASES.append((f"plan--params={count!r}", ["plan", "gpt-7b", "--gpus", "8", "--gpu-memory", "80GB",
                                              "--params", count], {2}))
for count in ("1e400", "1e99999999"):
    CASES.append((f"solve--params={count}", ["solve", "gpt-7b", "--max", "seq", "--gpu-memory", "80GB", "--params",
                                             count], {2}))
    CASES.append((f"calculator--params={count}", ["calculator", "-o", "c.html", "--params", count], {2}))
PLAN = ["plan", "gpt-175b", "--gpu-memory", "80GB"]
CASES += [
    ("plan-gpus-1e11", [*PLAN, "--gpus", "100000000000"], {2}),
    ("plan-gpus-1e16", [*PLAN, "--gpus", "10000000000000000"], {2}),
    ("plan-gpus-0", [*PLAN, "--gpus", "0"], {2}),
    ("plan-hardware-unknown", [*PLAN, "--gpus", "64", "--hardware", "nosuchgpu"], {2}),
    ("plan-hardware-devzero", [*PLAN, "--gpus", "64", "--hardware", "/dev/zero"], {2}),
    ("plan-hardware-folder", [*PLAN, "--gpus", "64", "--hardware", "/tmp"], {2}),
    ("plan-overlap-bogus", [*PLAN, "--gpus", "64", "--overlap", "sometimes"], {2}),
    ("bill-hardware-list", ["bill", "gpt-7b", "--hardware", "{d}/list.json"], {2}),
    ("plan-margin-nan%", [*PLAN, "--gpus", "64", "--margin", "nan%"], {2}),
    ("plan-margin-inf%", [*PLAN, "--gpus", "64", "--margin", "inf%"], {2}),
    ("plan-margin-100%", [*PLAN, "--gpus", "64", "--margin", "100%"], {2}),
    ("plan-margin--5%", [*PLAN, "--gpus", "64", "--margin", "-5%"], {2}),
    ("plan-margin-1e400%", [*PLAN, "--gpus", "64", "--margin", "1e400%"], {2}),
    ("plan-margin-90GB", [*PLAN, "--gpus", "64", "--margin", "90GB"], {2}),
    ("plan-max-micro-batch-1e9", [*PLAN, "--gpus", "64", "--max-micro-batch", "1000000000"], {2}),
    ("plan-top--1", [*PLAN, "--gpus", "64", "--top", "-1"], {2}),
    ("plan-gpus-per-node-0", [*PLAN, "--gpus", "64", "--gpus-per-node", "0"], {2}),
    ("plan-zero-4", [*PLAN, "--gpus", "64", "--zero", "4"], {2}),
    ("plan-dtype-int4", [*PLAN, "--gpus", "64", "--dtype", "int4"], {2}),
    ("plan-optimizer-free-text", [*PLAN, "--gpus", "64", "--optimizer", "adamw; touch PWNED"], {2}),
    ("plan-nothing-fits", ["plan", "gpt-1t", "--gpus", "8", "--gpu-memory", "1GB"], {1}),
    ("solve-huge-memory", ["solve", "gpt-7b", "--max", "micro-batch", "--gpu-memory", "900PB"], {2}),
    ("solve-huge-memory-seq", ["solve", "gpt-7b", "--max", "seq", "--gpu-memory", "900PB"], {0}),  # s ≈ 1.3e7
    ("solve-max-bogus", ["solve", "gpt-7b", "--max", "layers", "--gpu-memory", "80GB"], {2}),
    ("solve-margin-nan%", ["solve", "gpt-7b", "--max", "seq", "--gpu-memory", "80GB", "--margin", "nan%"], {2}),
    ("bill-tp-7", ["bill", "gpt-175b", "--tp", "7"], {2}),
    ("bill-interleave-no-pp", ["bill", "gpt-175b", "--interleave", "3"], {2}),
    ("bill-zero-5", ["bill", "gpt-7b", "--zero", "5"], {2}),
    ("bill-recompute-some", ["bill", "gpt-7b", "--recompute", "some"], {2}),
    ("bill-unknown-model", ["bill", "gpt-9b"], {2}),
    ("bill-model-injection", ["bill", "$(touch PWNED)"], {2}),
    ("bill-model-semicolon", ["bill", "gpt-7b; touch PWNED"], {2}),
    ("bill-model-backtick", ["bill", "`touch PWNED`"], {2}),
    ("bill-model-traversal", ["bill", "../../../../etc/passwd"], {2}),
    ("bill-model-dev-null", ["bill", "/dev/null"], {2}),
    ("bill-model-ansi-name", ["bill", "\x1b[2J\x1b[31mgpt"], {2}),
    ("bill-unknown-flag", ["bill", "gpt-7b", "--tp8"], {2}),
    ("no-command", [], {2}),
    ("unknown-command", ["rm", "-rf"], {2}),
    ("derive-unknown", ["derive", "memory"], {2}),
    ("derive-injection", ["derive", "__import__('os').system('touch PWNED')"], {2}),
    ("derive-lambda", ["derive", "(lambda: open('PWNED', 'w'))()"], {2}),
    ("derive-tp-word", ["derive", "activations", "--tp", "eight"], {2}),
    ("derive-tp-0", ["derive", "activations", "--tp", "0"], {2}),
    ("derive-arch-bogus", ["derive", "activations", "--arch", "rnn"], {2}),
    ("derive-model-missing", ["derive", "params", "--model", "{d}/nothing.json"], {2}),
    ("check-document-bogus", ["check", "--document", "seed 999"], {2}),
    ("timeline-optimize-bogus", ["timeline", "gpt-7b", "--optimize", "magic"], {2}),
    ("timeline-nccl-channels-0", ["timeline", "gpt-7b", "--nccl-channels", "0"], {2}),
    ("timeline-nccl-channels-huge", ["timeline", "gpt-7b", "--nccl-channels", "99999999999"], {2}),
    ("timeline-buffsize-nan", ["timeline", "gpt-7b", "--nccl-buffsize", "nanMiB"], {2}),
    ("timeline-bucket-huge", ["timeline", "gpt-7b", "--bucket", "1e99999999MiB"], {2}),
    ("timeline-cp", ["timeline", "gpt-7b", "--cp", "2"], {2}),
    ("trace-factory-injection", ["trace", "--factory", "os:system;touch PWNED", "--dims", "s=2,3"], {2}),
    ("trace-factory-missing", ["trace", "--factory", "no_such_module_x:f", "--dims", "s=2,3"], {2}),
    ("trace-set-injection", ["trace", "--hf", "{d}/ansi.json", "--set", "x=$(touch PWNED)"], {2}),
    ("trace-seq-huge", ["trace", "--hf", "{d}/ansi.json", "--seqs", "99999999999"], {2}),
    ("trace-dtype-fp8", ["trace", "--hf", "{d}/ansi.json", "--dtype", "fp8"], {2}),
    ("trace-hf-deep", ["trace", "--hf", "{d}/deep.json"], {2}),
    ("trace-hf-zero", ["trace", "--hf", "{d}/zero.json"], {2}),
    ("trace-hf-fifo", ["trace", "--hf", "{d}/fifo.json"], {2}),
    ("trace-hf-list", ["trace", "--hf", "{d}/list.json"], {2}),
]
# Config files, through every command that reads one.
CONFIGS = ["deep", "deep_list", "list", "empty", "text", "latin1", "nan", "bigint", "big", "zero", "dangling",
           "fifo", "layers_huge", "layers_str", "layers_float", "layers_bool", "layers_zero", "layers_neg",
           "hidden_huge", "vocab_huge", "heads_indivisible", "kv_indivisible", "missing_hidden", "experts_on_llama",
           "tied_str", "seq_huge", "nothing"]
for name in CONFIGS:
    CASES.append((f"bill-config-{name}", ["bill", f"{{d}}/{name}.json"], {2}))
for name in ("deep", "zero", "fifo", "layers_huge", "experts_on_llama", "list"):
    CASES += [
        (f"plan-config-{name}", ["plan", f"{{d}}/{name}.json", "--gpus", "8", "--gpu-memory", "80GB"], {2}),
        (f"solve-config-{name}", ["solve", f"{{d}}/{name}.json", "--max", "seq", "--gpu-memory", "80GB"], {2}),
        (f"timeline-config-{name}", ["timeline", f"{{d}}/{name}.json"], {2}),
        (f"derive-config-{name}", ["derive", "params", "--model", f"{{d}}/{name}.json"], {2}),
        (f"snapshot-compare-{name}", ["snapshot", "{d}/s_ok.pickle", "--compare", f"{{d}}/{name}.json"], {2}),
    ]
CASES.append(("bill-config-folder-without-config", ["bill", "{d}/folder"], {2}))
CASES.append(("bill-config-markup-name", ["bill", "{d}/markup.json"], {0}))
CASES.append(("derive-config-markup-name", ["derive", "params", "--model", "{d}/markup.json"], {0}))
# Snapshot files.
SNAPSHOTS = ["s_missing_addr", "s_str_addr", "s_str_size", "s_neg_size", "s_list_time", "s_str_stream",
             "s_frames_str", "s_map_no_addr", "s_oom_str_free", "s_seg_str_size", "s_block_str_addr", "s_block_state",
             "s_seg_dev_str", "s_traces_dict", "s_trace_int", "s_entry_list", "s_top_list", "s_top_none", "s_build",
             "s_truncated", "s_empty", "s_text", "s_gzip_garbage", "s_gzip_truncated", "s_bomb", "s_reduce_system",
             "s_reduce_mkdir", "s_reduce_eval", "s_persistent", "s_zero", "s_fifo", "s_missing"]
for name in SNAPSHOTS:
    CASES.append((f"snapshot-{name}", ["snapshot", f"{{d}}/{name}.pickle"], {2}))
CASES += [
    ("snapshot-folder", ["snapshot", "{d}/folder"], {2}),
    ("snapshot-nulls", ["snapshot", "{d}/s_nulls.pickle"], {0}),
    ("snapshot-device-neg", ["snapshot", "{d}/s_ok.pickle", "--device", "-5"], {2}),
    ("snapshot-device-absent", ["snapshot", "{d}/s_ok.pickle", "--device", "7"], {2}),
    ("snapshot-transient-neg", ["snapshot", "{d}/s_ok.pickle", "--transient-allocs", "-1"], {2}),
]
# Output paths that cannot be written.
for command, flag, name in (("sheet", "-o", "x.tex"), ("calculator", "-o", "x.html"),
                            ("timeline", "--png", "x.png"), ("snapshot", "--png", "x.png")):
    head = {"sheet": ["sheet"], "calculator": ["calculator"], "timeline": ["timeline", "gpt-7b"],
            "snapshot": ["snapshot", "{d}/s_ok.pickle"]}[command]
    for where in ("{d}/no/such/folder/" + name, "{d}/folder", "/dev/full", "/proc/no-such/" + name, ""):
        CASES.append((f"{command}-output-{where.replace('{d}', 'D')}", [*head, flag, where], {2}))
    if command != "sheet":
        CASES.append((f"{command}-output-readonly", [*head, flag, "{d}/ro/" + name], {2}))


def test_the_corpus_is_large():
    assert len(CASES) >= 150 and len({case[0] for case in CASES}) == len(CASES)


def _listing(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


def _run(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def _assert_one_clean_line(code, out, err, codes):
    assert code in codes, (code, err)
    assert "Traceback" not in err and "internal error" not in err, err
    lines = err.strip().splitlines()
    if code == 2:  # bad input: one line naming it (a failed check, exit 1, answers on stdout)
        assert len(lines) == 1, err
    elif code == 1:
        assert len(lines) <= 1, err
    for text in (out, err):
        assert "\x1b" not in text and "\x07" not in text and "\x9b" not in text, repr(text[:200])


@pytest.mark.parametrize("name, argv, codes", CASES, ids=[case[0] for case in CASES])
def test_hostile_input_is_one_line(name, argv, codes, corpus, tmp_path, monkeypatch, capsys):
    if name.endswith("-output-readonly") and os.geteuid() == 0:
        # root writes into a chmod-read-only folder; sysfs refuses even root (EACCES on create)
        argv = [word.replace("{d}/ro/", "/sys/symbolic-test-") for word in argv]
    if name.startswith("trace-") and "--hf" in argv and not name.endswith(("deep", "zero", "fifo", "list")):
        pytest.importorskip("torch")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SYMBOLIC_SNAPSHOT_MAX_BYTES", str(2**20))  # the gzip bomb must stop at 1 MiB
    argv = [word.replace("{d}", str(corpus)) for word in argv]
    before_corpus = _listing(corpus)
    code, out, err = _run(argv, capsys)
    _assert_one_clean_line(code, out, err, codes)
    named = re.search(r"(--[a-z-]+)=", name)  # a case about one flag: the line names that flag
    if named and code == 2:
        assert named.group(1) in err, err
    assert _listing(tmp_path) == set(), "a file was written outside the named output"
    assert _listing(corpus) == before_corpus
    assert not (tmp_path / MARKER).exists() and not (corpus / MARKER).exists()


def test_control_characters_from_a_config_never_reach_the_terminal(corpus, capsys):
    code, out, err = _run(["bill", str(corpus / "ansi.json")], capsys)
    assert code == 0 and "\x1b" not in out and "\\x1b[31mEVIL" in out
    code, out, err = _run(["bill", str(corpus / "ansi.json"), "--json"], capsys)
    assert code == 0 and "\x1b" not in out and json.loads(out)


def test_plan_json_is_always_valid_json(capsys):
    code, out, _ = _run(["plan", "gpt-7b", "--gpus", "8", "--gpu-memory", "80GB", "--json",
                         "--top", "2"], capsys)
    assert code == 0 and "Infinity" not in out and "NaN" not in out
    json.loads(out, parse_constant=lambda name: pytest.fail(f"{name} in JSON"))


def test_experts_on_a_dense_family_are_refused_not_billed_dense(corpus, capsys):
    code, _, err = _run(["bill", str(corpus / "experts_on_llama.json")], capsys)
    assert code == 2 and "num_local_experts = 8" in err and "dense" in err


def test_a_gzip_bomb_stops_at_the_cap(corpus, monkeypatch):
    from symbolic.step.snapshot import SnapshotError, load

    monkeypatch.setenv("SYMBOLIC_SNAPSHOT_MAX_BYTES", str(2**20))
    with pytest.raises(SnapshotError, match="decompresses to more than 1,048,576 B"):
        load(corpus / "s_bomb.pickle")


def test_internal_errors_are_one_line_and_please_report(monkeypatch, capsys):
    import symbolic.commands.check as check

    def broken(args):
        raise KeyError("a bug")
    monkeypatch.setattr(check, "run", broken)
    code, _, err = _run(["check"], capsys)
    assert code == 3 and "please report" in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    code, _, err = _run(["check", "--debug"], capsys)
    assert code == 3 and "Traceback" in err and "please report" in err


def _process(*argv, **kw):
    return subprocess.run([sys.executable, "-m", "symbolic", *argv], capture_output=True, text=True,
                          cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), **kw)


def test_stdout_onto_a_full_disk_is_one_line():
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "symbolic", "bill", "gpt-7b", "--json"], stdout=full,
                              stderr=subprocess.PIPE, text=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert done.returncode == 2 and "no space left" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


def test_a_broken_pipe_ends_quietly():
    line = f"{sys.executable} -m symbolic bill gpt-175b --tp 8 --pp 8 --sp | head -c 20 > /dev/null"
    done = subprocess.run(["bash", "-o", "pipefail", "-c", line], capture_output=True, text=True, cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert done.stderr == "" and done.returncode == 0


# --- hypothesis: the argument space -------------------------------------------------------------

_VALUES = st.sampled_from(NUMBERS + SIZES + COUNTS + ["8", "1", "4096", "80GB", "10%", "full", "bf16", "bfloat16",
                                                      "fp32", "selective", "3", "gpt-7b", "\x1b[31m", "-"])
_FLAGS = st.sampled_from(LAYOUT_FLAGS + ["--gpu-memory", "--params", "--margin", "--dtype", "--optimizer", "--zero",
                                         "--recompute", "--gpus", "--hardware", "--top", "--sp", "--json"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(command=st.sampled_from(["bill", "plan", "solve", "derive"]),
       pairs=st.lists(st.tuples(_FLAGS, _VALUES), max_size=4))
def test_fuzzed_arguments_never_end_in_a_traceback(command, pairs, capsys):
    head = {"bill": ["bill", "gpt-7b"], "plan": ["plan", "gpt-7b", "--gpus", "8", "--gpu-memory", "80GB"],
            "solve": ["solve", "gpt-7b", "--max", "micro-batch", "--gpu-memory", "80GB"],
            "derive": ["derive", "activations"]}[command]
    argv = head + [word for flag, value in pairs for word in ((flag,) if flag in ("--sp", "--json") else (flag, value))]
    code, out, err = _run(argv, capsys)
    _assert_one_clean_line(code, out, err, {0, 1, 2})


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=40))
def test_every_parser_type_refuses_cleanly(text):
    """Each argparse ``type`` of every command returns or raises the errors argparse reports as one line."""
    import argparse

    for action in _actions():
        if callable(action.type):
            try:
                action.type(text)
            except (argparse.ArgumentTypeError, ValueError, TypeError):
                pass


# --- one vocabulary (issue 13 item 3) -------------------------------------------------------------

def _actions():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    for command, cparser in sub.choices.items():
        for action in cparser._actions:
            action.command = command
            yield action


def test_every_flag_has_one_type_and_one_set_of_choices_everywhere():
    """Walk every command's parser: a flag that several commands have must have the same
    type and choices in each (new flags are checked too), and every flag has help."""
    seen: dict[str, tuple] = {}
    for action in _actions():
        for flag in action.option_strings:
            if flag in ("-h", "--help"):
                continue
            assert action.help, f"{action.command} {flag} has no help"
            kind = (action.type, tuple(action.choices) if action.choices is not None else None)
            if action.nargs == 0:  # a switch (store_true/false/const) is its own kind
                kind = ("switch",)
            if flag in seen and kind != ("switch",) and seen[flag][1] != ("switch",):
                assert seen[flag][1] == kind, (f"{flag}: {seen[flag][0]} has {seen[flag][1]}, "
                                               f"{action.command} has {kind}")
            elif flag not in seen or seen[flag][1] == ("switch",):
                seen[flag] = (action.command, kind)
    assert {"--tp", "--dtype", "--zero", "--optimizer", "--recompute"} <= set(seen)


def test_choices_are_listed_in_help(capsys):
    for command in COMMANDS:
        main([command, "--help"])
        text = capsys.readouterr().out
        if command in ("bill", "plan", "timeline", "solve"):
            assert "{bf16,fp16,fp32,fp8}" in text and "{none,selective,full,op-sac}" in text and "{0,1,2,3}" in text


@pytest.mark.parametrize("text, value", [("80gb", 80 * 10**9), ("80 GB", 80 * 10**9), ("80GiB", 80 * 2**30),
                                         ("80 gib", 80 * 2**30), ("1.5TB", 1.5e12), ("2e1GB", 20 * 10**9)])
def test_one_size_parser(text, value):
    from symbolic.commands._options import parse_memory
    assert parse_memory(text) == value


@pytest.mark.parametrize("spelling", ["bf16", "bfloat16", "BF16", "BFloat16"])
def test_one_dtype_vocabulary(spelling, capsys):
    code, out, _ = _run(["bill", "gpt-7b", "--dtype", spelling, "--json"], capsys)
    assert code == 0 and json.loads(out)["layout"]["dtype"] == "bf16"


def test_derive_takes_a_value_and_substitutes_it(capsys):
    code, out, _ = _run(["derive", "activations", "--tp", "8", "--sp", "--json"], capsys)
    data = json.loads(out)
    assert code == 0 and data["substituted"] == {"t": 8} and "t" not in data["at_values"]
    code, out, _ = _run(["derive", "activations", "--tp", "--sp", "--json"], capsys)
    assert code == 0 and "substituted" not in json.loads(out)
