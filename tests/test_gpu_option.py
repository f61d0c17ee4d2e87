"""``--gpu NAME``: one GPU sets the memory and the step-time hardware (issue 23 item 2);
``--gpu-memory`` and ``--hardware`` override it; the answer names the GPU."""
import json

import pytest

import symbolic
from symbolic.cli import main
from symbolic.ledgers.hardware import builtin


def _json(argv, capsys):
    assert main(argv + ["--json"]) in (0, 1)
    return json.loads(capsys.readouterr().out)


def _text(argv, capsys):
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("name, memory, hardware", [
    ("h100", 80 * 10**9, "H100-SXM5-80GB"), ("h200", 141 * 10**9, "H200-SXM-141GB"),
    ("b200", 180 * 10**9, "B200-180GB"), ("gb200", 186 * 10**9, "GB200-NVL72"),
    ("a100-40gb", 40 * 10**9, "A100-SXM4-40GB"), ("a100-80gb", 80 * 10**9, "A100-SXM4-80GB"),
])
def test_gpu_sets_memory_and_hardware(name, memory, hardware, capsys):
    data = _json(["bill", "gpt-7b", "--gpu", name], capsys)
    assert data["gpu_memory_bytes"] == memory and data["time_model"]["hardware"] == hardware
    assert data["gpu"] == {"name": hardware, "memory_bytes": memory, "memory_from": f"--gpu {name}",
                           "hardware": hardware, "hardware_from": f"--gpu {name}"}


def test_gpu_memory_of_a_gpu_name_prices_time_on_that_gpu(capsys):
    by_name = _json(["bill", "gpt-7b", "--gpu-memory", "h100"], capsys)
    by_gpu = _json(["bill", "gpt-7b", "--gpu", "h100"], capsys)
    assert by_name["time_model"]["hardware"] == "H100-SXM5-80GB"  # was A100-SXM4-80GB
    assert by_name["step_seconds"] == by_gpu["step_seconds"] and by_name["gpu_memory_bytes"] == 80 * 10**9
    a100 = _json(["bill", "gpt-7b", "--gpu-memory", "a100"], capsys)  # was refused
    assert a100["gpu_memory_bytes"] == 80 * 10**9 and a100["time_model"]["hardware"] == "A100-SXM4-80GB"


def test_overrides_and_conflicts(capsys):
    data = _json(["bill", "gpt-7b", "--gpu", "h200", "--gpu-memory", "100GB"], capsys)
    assert data["gpu_memory_bytes"] == 100 * 10**9 and data["time_model"]["hardware"] == "H200-SXM-141GB"
    data = _json(["bill", "gpt-7b", "--gpu", "h200", "--hardware", "b200"], capsys)
    assert data["gpu_memory_bytes"] == 141 * 10**9 and data["time_model"]["hardware"] == "B200-180GB"
    code, _, err = _text(["bill", "gpt-7b", "--gpu", "h100", "--gpu-memory", "b200"], capsys)
    assert code == 2 and "name two GPUs" in err and len(err.strip().splitlines()) == 1
    code, _, err = _text(["bill", "gpt-7b", "--gpu", "h900"], capsys)
    assert code == 2 and "--gpu 'h900': unknown GPU" in err and "h100-sxm" in err


def test_the_first_lines_name_the_gpu_and_the_time_hardware(capsys):
    _, out, _ = _text(["bill", "gpt-7b", "--gpu", "h100", "--brief"], capsys)
    assert "GPU: H100-SXM5-80GB, 80.00 GB (--gpu h100); the step time is for it" in out.splitlines()[:6]
    _, out, _ = _text(["bill", "gpt-7b", "--gpu-memory", "24GB", "--brief"], capsys)
    assert "GPU: 24.00 GB (--gpu-memory); step time on A100-SXM4-80GB (the default)" in out.splitlines()[:6]
    _, out, _ = _text(["bill", "gpt-7b", "--hardware", "h100", "--brief"], capsys)
    assert "GPU: no memory given (--gpu NAME); step time on H100-SXM5-80GB (--hardware h100)" in out


@pytest.mark.parametrize("argv", [
    ["plan", "gpt-7b", "--gpus", "8", "--gpu", "h200", "--top", "1"],
    ["solve", "gpt-7b", "--max", "micro-batch", "--tp", "8", "--gpu", "h200"],
    ["timeline", "gpt-7b", "--gpu", "h200"],
])
def test_plan_solve_timeline_take_gpu(argv, capsys):
    data = _json(argv, capsys)
    assert data["gpu"]["memory_bytes"] == 141 * 10**9 and data["gpu"]["name"] == "H200-SXM-141GB"
    assert data.get("gpu_memory_bytes", 141 * 10**9) == 141 * 10**9
    if argv[0] == "plan":
        assert data["hardware"]["name"] == "H200-SXM-141GB"
    _, out, _ = _text(argv + ["--brief"], capsys)
    assert "GPU: H200-SXM-141GB, 141.00 GB (--gpu h200)" in out


def test_plan_without_a_gpu_is_one_line(capsys):
    code, _, err = _text(["plan", "gpt-7b", "--gpus", "8"], capsys)
    assert code == 2 and "--gpu NAME" in err and len(err.strip().splitlines()) == 1


def test_api_takes_gpu():
    bill = symbolic.bill("gpt-7b", gpu="h100")
    assert bill.gpu_memory_bytes == 80 * 10**9 and bill.to_dict()["time_model"]["hardware"] == "H100-SXM5-80GB"
    assert symbolic.bill("gpt-7b", gpu_memory="h100").to_dict()["step_seconds"] == bill.to_dict()["step_seconds"]
    assert symbolic.solve("gpt-7b", max="micro-batch", tp=8, gpu="b200").to_dict()["gpu_memory_bytes"] == 180 * 10**9
    with pytest.raises(symbolic.ConfigError, match="unknown GPU"):
        symbolic.bill("gpt-7b", gpu="x100")


def test_every_gpu_file_gives_its_memory():
    assert {kind.hbm_bytes for kind in builtin().values()} >= {40e9, 80e9, 141e9, 180e9, 186e9}
