"""The HTML calculator: generated from the engine, checked in a real browser.

Headless Chromium (Debian's, /usr/bin/chromium) driven by playwright sets the
page's inputs and reads its numbers; each must equal the engine's exact value
(``make_bill`` and ``quantities``) rounded the same way (``numeric.fmt``).
Configurations include seed 001 §05's 7B and 175B examples and §06's
interleaved 175B/530B table.

Screenshot for the README: ``python tests/test_calculator.py docs/calculator.png``.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest
from sympy import Rational, expand

from symbolic.models.architectures import gpt
from symbolic.bill.derive import make_bill
from symbolic.core.dims import f
from symbolic.ledgers import params
from symbolic.cli import main
from symbolic.commands._options import parse_count, parse_memory
from symbolic.layout.layout import Layout
from symbolic.models.config import ConfigError, ModelConfig
from symbolic.models.builtin import PRESETS, preset
from symbolic.core.numeric import exact, fmt
from symbolic.claims.quantities import evaluate
from symbolic.render import html

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]


# --- without a browser: the generated formulas are the engine's -------------

@pytest.fixture(scope="module")
def page_formulas():
    """html.formulas() over the built-in models, built once for the tests that read them all."""
    return html.formulas()


def test_every_formula_is_its_engine_expression_as_num_over_den(page_formulas):
    items = page_formulas
    # GPT: 4 + 2 params, 4 ZeRO stages × every per-parameter recipe of states (html.recipes: not
    # factored), 72 activations,
    # 6 FLOPs/tokens; LLaMA: 2 + 1 params, 72
    # activations, 5 FLOPs; MoE: as LLaMA + 2 N_active. The verdict: 10 multiplicities (k·n, k·n − 1 per
    # schedule and stage), the communication buffers, 2 in-flight counts, 2 optimizer-step temporaries;
    # per inventory, SP × 3 dtypes (fp16 as bf16) × the instants' 9 terms, one per recompute policy where
    # it changes them: GPT 5 × 3 + 4 = 19, LLaMA and MoE (fused attention) 4 × 3 + 5 = 17; and ZeRO-3's
    # gathered weights per inventory at each parameter width of the recipes. Each built-in model's own
    # inventory (the composed families): as LLaMA (fused attention), + 2 N_active with routed experts.
    # Every mixture of experts (MoE and the composed ones with a router) also has its expert grid: the
    # model states per ZeRO stage and recipe, 2 optimizer-step temporaries, 2 communication buffers (SP).
    per_parameter = len(html.page_recipes())
    widths = len({recipe.bytes_of("parameters") for recipe in html.page_recipes().values()})
    own = html.page_models()
    assert len(own) == 4
    grids = 1 + sum(bool(model.experts) for model in own.values())
    # LoRA / QLoRA / offload on the LLaMA inventory (html.lever_formulas): the frozen base per tied × 4 bases
    # (bf16, int8, nf4, nf4 without double quant) × 4 ZeRO stages × 3 offloads; the adapters per recipe × ZeRO
    # × offload; full-training offload per recipe × ZeRO × 2; the adapters' count and 2 optimizer temporaries;
    # 72 activations and 17 × 6 verdict terms with the adapters' A·x, 4 gathered bases, 3 + 1 FLOPs
    lever = 2 * 4 * 4 * 3 + per_parameter * 4 * 3 + per_parameter * 4 * 2 + 3 + 72 + 6 * 17 + 4 + 4
    assert len([item for item in html.lever_formulas(html.LEVER_ARCH) if "@" not in item.key]) == lever
    # the loss kernels (html.LOSS_TERMS): per inventory (GPT, LLaMA, MoE, the 4 own, LLaMA with LoRA) SP × 3
    # dtypes × 5 kernels beyond eager × the output side and the loss's work tensors (recompute changes neither)
    losses = sum("@" in item.key for item in items)
    assert losses == 8 * 2 * 3 * 5 * 2
    assert len(items) - losses == 86 + lever + 4 * per_parameter + 80 + 82 + 15 + 6 * (19 + 17 + 17) + 3 * widths + sum(
        80 + 2 * bool(model.experts) + 6 * 17 + widths for model in own.values()) + grids * (4 * per_parameter + 4)
    checked = set()  # num/den are a function of the expression (html._numerator_denominator): a third of the
    for item in items:  # keys share an expression (fp16 as bf16, ...), whose identity is checked once
        num, den = item.parts()
        if item.expr not in checked:
            assert expand(num / den - item.expr) == 0, item.key
            checked.add(item.expr)


def test_the_page_inlines_the_generated_script_and_needs_no_network():
    page = html.render(preset("gpt-7b"), Layout(micro_batch=4, tp=8, sp=True), 7 * 10**9, 80 * 10**9)
    assert html.javascript() in page
    assert "/*@" not in page and "@TITLE@" not in page
    for remote in ("http://", "https://", "<link", "src="):
        assert remote not in page


def test_the_pages_formulas_are_read_back_from_the_cache_and_a_bad_entry_is_derived_again(tmp_path, monkeypatch,
                                                                                           capsys, page_formulas):
    """html.formula_section: the page's FORMULAS and the facts its data reads off them, read back from the
    cache folder without sympy (formulas() refused) and equal to the derived ones; an entry edited on disk
    (its hash no longer matching) or one whose text is not a generated table (rehashed) is discarded with
    one note, and the formulas derived again."""
    import hashlib
    import json
    import shutil

    from symbolic.bill.cache import folder

    models = html.page_models()
    built = html.formula_section(models)  # derived here or by an earlier test, and written to the run's cache
    assert built == (html.javascript(page_formulas), html.formula_facts(page_formulas))  # stored = derived
    entry = next(path for path in folder().glob("page-formulas-*.json")
                 if json.loads(json.loads(path.read_text())["derived"])["javascript"] == built[0])
    monkeypatch.setenv("SYMBOLIC_CACHE_DIR", str(tmp_path))
    copy = folder() / entry.name
    copy.parent.mkdir(parents=True)
    shutil.copy(entry, copy)
    monkeypatch.setattr(html, "_FORMULA_SECTIONS", {})

    def refuse(*args, **kwargs):
        raise AssertionError("derived, though the cache holds it")

    monkeypatch.setattr(html, "formulas", refuse)
    assert html.formula_section(models) == built
    stored = json.loads(copy.read_text())
    for rehash, javascript in ((False, built[0].replace("return ", "return 1000 * ", 1)), (True, "alert(1)")):
        derived = dict(json.loads(stored["derived"]), javascript=javascript)
        text = json.dumps(derived)
        copy.write_text(json.dumps(dict(stored, derived=text, **(
            {"sha256": hashlib.sha256(text.encode()).hexdigest()} if rehash else {}))))
        monkeypatch.setattr(html, "_FORMULA_SECTIONS", {})
        capsys.readouterr()
        with pytest.raises(AssertionError, match="derived, though"):
            html.formula_section(models)
        assert not copy.exists() and len(capsys.readouterr().err.strip().splitlines()) == 1


def test_a_page_section_is_built_once_by_processes_sharing_the_cache(tmp_path, monkeypatch):
    """page_time.cached_section: two builders of one entry at once (the suite's two xdist workers) — the
    second waits on the first's lock file, then reads its entry: one build, the same section for both; a
    third call reads it; with the cache off each call builds."""
    import threading
    import time

    from symbolic.bill.cache import folder
    from symbolic.render.page_time import cached_section

    monkeypatch.setenv("SYMBOLIC_CACHE_DIR", str(tmp_path))
    path = folder() / "page-test-section.json"
    builds = []

    def build():
        builds.append(threading.get_ident())
        time.sleep(0.3)  # long enough for the other thread to reach the lock
        return "const TIME = 1;", "const TIME = 1;"

    def load(text):
        return text if text.startswith("const TIME") else None

    results = []
    threads = [threading.Thread(target=lambda: results.append(cached_section(path, "k", load, build)))
               for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == ["const TIME = 1;"] * 2 and len(builds) == 1
    assert cached_section(path, "k", load, build) == "const TIME = 1;" and len(builds) == 1
    assert cached_section(None, "k", load, build) == "const TIME = 1;" and len(builds) == 2


def test_a_section_another_process_builds_is_seen_without_waiting_and_the_page_builds_the_other_first(
        tmp_path, monkeypatch):
    """page_time.being_built: true while another builder holds an absent entry's lock (flock, probed without
    waiting), false once it is released, for an entry already written and with the cache off; html.render then
    prices the step time before it asks for the formulas, and the page is the same bytes."""
    from symbolic.render import page_time
    from symbolic.render.page_time import _one_builder, being_built

    path = tmp_path / "page-test-section.json"
    assert not being_built(path) and not being_built(None)
    with _one_builder(path):
        assert being_built(path)  # another open file description: flock refuses it as it would another process
    assert not being_built(path)
    path.write_text("{}")
    with _one_builder(path):
        assert not being_built(path)  # written: it is read, not built
    args = (preset("gpt-7b"), Layout(micro_batch=4, tp=8, sp=True), 7 * 10**9, 80 * 10**9)
    page = html.render(*args)
    order = []
    for module, name in ((html, "formula_section"), (page_time, "time_section")):
        monkeypatch.setattr(module, name,
                            lambda *a, _f=getattr(module, name), _n=name, **k: order.append(_n) or _f(*a, **k))
    monkeypatch.setattr(page_time, "being_built", lambda path: True)
    assert html.render(*args) == page and order == ["time_section", "formula_section"]


def test_cli_writes_the_page_and_refuses_bad_input(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a short file name: a path is one word, it cannot wrap
    monkeypatch.setenv("COLUMNS", "80")
    out = tmp_path / "c.html"
    assert main(["calculator", "-o", "c.html"]) == 0
    assert "const FORMULAS" in out.read_text() and '"N": "7B"' in out.read_text()
    printed = capsys.readouterr().out.rstrip("\n").split("\n")
    assert printed[0].startswith("wrote c.html") and max(map(len, printed)) <= 80  # fits an 80-column terminal
    assert main(["calculator", "-o", str(tmp_path / "x.html"), "--tp", "3"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "heads (32) must be divisible by tp (3)" in err[0]


def test_llama_and_moe_models_have_their_own_formulas(tmp_path, page_formulas):
    """Every built-in model is on the page; the LLaMA/MoE formulas are keyed ``arch:`` and generated
    from the inventories the bill itemises, and so are each composed family's (Qwen3, Qwen3-MoE,
    Gemma-2, DeepSeek-V3), keyed by the page's name of their inventory, with their own letters."""
    data = html.page_data(preset("gpt-7b"), Layout(), None, None)
    composed = {name for name, model in PRESETS.items() if model.arch == "composed"}
    assert composed == {"qwen3-8b", "qwen3-30b-a3b", "gemma-2-9b", "deepseek-v3"}
    assert set(data["presets"]) == set(PRESETS)
    deepseek = data["presets"]["deepseek-v3"]
    arch = data["archs"][deepseek["arch"]]
    assert arch["experts"] and arch["own_width"] and {"L_d", "f_s", "r_q", "r_kv", "d_n", "d_r", "d_v"} <= set(
        arch["fields"]) and "g" not in arch["fields"]  # MLA: no key/value grouping
    assert (deepseek["L_d"], deepseek["r_kv"]) == (3, 512)
    assert data["presets"]["gemma-2-9b"]["approximations"]  # listed next to it, never silent
    assert (data["presets"]["mixtral-8x7b"]["arch"], data["presets"]["mixtral-8x7b"]["g"]) == ("moe", 8)
    keys = {item.key for item in page_formulas}
    assert {"llama:params/untied/rope", "moe:params_active/untied/rope", "moe:flops/hardware/full",
            "llama:activations/sp/selective/1f1b/bf16"} <= keys
    assert not any(key.startswith("llama:params/") and key.endswith("/learned") for key in keys)
    out = tmp_path / "mixtral.html"
    assert main(["calculator", "--model", "mixtral-8x7b", "--tp", "8", "--seq", "4096", "-o", str(out)]) == 0
    assert '"arch": "moe"' in out.read_text()


# --- in the browser ---------------------------------------------------------

@dataclass(frozen=True)
class Case:
    model: ModelConfig
    layout: Layout
    params: str = ""          # hand-filled N as typed
    gpu: str = "80GB"
    preset: str = "custom"    # the page's preset menu entry, or custom fields
    seed: dict = field(default_factory=dict)  # numbers the seed prints, field -> text


# The seed's totals are the papers' (states + first-stage activations): out-paper-total; the page's
# out-total is the verdict (the step's peak on the busiest GPU), as the bill's total_bytes.
SEED_7B = Case(preset("gpt-7b"), Layout(micro_batch=4, tp=8, sp=True), "7B", preset="gpt-7b",
               seed={"out-states": "14.00 GB", "out-activations": "52.08 GB", "out-paper-total": "66.08 GB"})
# Korthikanti's p micro-batches in flight need m ≥ p per iteration: a global batch of 8 (m = 8 = p).
SEED_175B = Case(preset("gpt-175b"), Layout(micro_batch=1, tp=8, pp=8, sp=True, global_batch=8), "175B",
                 preset="gpt-175b",
                 seed={"out-states": "43.75 GB", "out-activations": "34.43 GB", "out-paper-total": "78.18 GB"})
CASES = {
    "seed-7b": SEED_7B,
    "seed-7b-b8": Case(preset("gpt-7b"), Layout(micro_batch=8, tp=8, sp=True), "7B", preset="gpt-7b",
                       seed={"out-activations": "104.15 GB", "out-verdict": "does NOT fit"}),
    "seed-175b": SEED_175B,
    "seed-175b-selective": Case(preset("gpt-175b"), Layout(micro_batch=1, tp=8, pp=8, sp=True, recompute="selective",
                                                           global_batch=8),
                                "175B", preset="gpt-175b",
                                seed={"out-activations": "10.27 GB", "out-paper-total": "54.02 GB"}),
    # the interleaved factor 1 + (p−1)/(pv) needs m > p (Megatron-LM runs all m·v forwards first at m = p)
    "seed-175b-interleaved": Case(preset("gpt-175b"), Layout(tp=8, pp=8, sp=True, interleave=3, global_batch=16), "",
                                  preset="gpt-175b", seed={"out-activations": "44.47 GB"}),
    "seed-530b-interleaved-selective": Case(preset("gpt-530b"), Layout(tp=8, pp=35, sp=True, interleave=3,
                                                                       recompute="selective", global_batch=70),
                                            "", preset="gpt-530b", seed={"out-activations": "24.78 GB"}),
    # fewer micro-batches than stages: min(m, p) = 2 in flight
    "few-micro-batches-1f1b": Case(preset("gpt-22b"), Layout(micro_batch=2, tp=4, pp=4, global_batch=4), "",
                                   preset="gpt-22b"),
    # rationals (16Ψ/(t·p·d) with d ∤ Ψ), untied, RoPE, own FFN, fp32, full recompute, accumulation, GiB
    "custom-zero3-full-fp32": Case(ModelConfig("custom", 24, 2048, 16, 32000, 1024, ffn=5504, tied=False,
                                               positions="rope"),
                                   Layout(micro_batch=2, tp=2, dp=3, zero=3, optimizer="fp32-adam", recompute="full",
                                          dtype="fp32", global_batch=2 * 3 * 4), "", "40GiB"),
    # LLaMA and MoE: their own inventories (GQA, SwiGLU, RMSNorm, fused attention; N_total vs N_active)
    "llama-2-7b": Case(preset("llama-2-7b"), Layout(micro_batch=2, tp=8, sp=True), "", preset="llama-2-7b"),
    "mixtral-pp-selective": Case(preset("mixtral-8x7b"), Layout(seq=4096, tp=8, pp=4, dp=2, sp=True,
                                                                 recompute="selective", zero=1, global_batch=32),
                                 "", "141GB", preset="mixtral-8x7b"),
    "custom-llama-gqa-tied-full": Case(ModelConfig("custom", 8, 1024, 16, 32000, 2048, ffn=2816, tied=True,
                                                   positions="rope", arch="llama", kv_heads=4),
                                       Layout(micro_batch=2, tp=4, dp=2, zero=1, recompute="full"), "", "24GB"),
    "custom-moe-shared-fp8": Case(ModelConfig("custom", 4, 1024, 16, 32000, 1024, ffn=2816, tied=False,
                                              positions="rope", arch="moe", kv_heads=8, experts=16,
                                              experts_per_token=4, shared_experts=2, expert_ffn=512),
                                  Layout(micro_batch=2, tp=2, pp=2, sp=True, dtype="fp8", recompute="selective"),
                                  "", "16GB"),
    "custom-zero1-sgd-1f1b": Case(ModelConfig("custom", 12, 768, 12, 50257, 1024),
                                  Layout(micro_batch=3, tp=4, pp=2, dp=6, zero=1, optimizer="bf16-sgd-momentum",
                                         recompute="selective", dtype="fp8"), "1.5B", "24GB"),
    # the composed families (issue 10): their own inventories and letters, as the bill itemises them
    "qwen3-8b-pp-selective": Case(preset("qwen3-8b"), Layout(seq=4096, tp=4, pp=2, dp=2, sp=True,
                                                             recompute="selective", zero=1, global_batch=16),
                                  "", preset="qwen3-8b"),
    "qwen3-30b-a3b-zero3-full": Case(preset("qwen3-30b-a3b"), Layout(seq=4096, tp=4, dp=4, sp=True, zero=3,
                                                                     recompute="full"), "", "141GB",
                                     preset="qwen3-30b-a3b"),
    "gemma-2-9b-fp32-untied": Case(replace(preset("gemma-2-9b"), tied=False),
                                   Layout(seq=2048, micro_batch=2, tp=8, dtype="fp32", optimizer="fp32-adam"),
                                   "", "80GB"),
    # expert parallelism (--ep): the routed experts over e ranks, ZeRO over edp = t·d/e, the all-to-all's
    # staging and the expert grid's communicators
    "mixtral-ep4-zero1": Case(preset("mixtral-8x7b"), Layout(seq=4096, tp=2, dp=4, ep=4, sp=True, zero=1,
                                                            recompute="selective"), "", "80GB",
                              preset="mixtral-8x7b"),
    "qwen3-30b-a3b-ep8-1f1b": Case(preset("qwen3-30b-a3b"), Layout(seq=4096, tp=2, pp=2, dp=8, ep=8, sp=True,
                                                                   global_batch=32), "", "141GB",
                                   preset="qwen3-30b-a3b"),
    "custom-moe-ep-nosp": Case(ModelConfig("custom", 4, 1024, 16, 32000, 1024, ffn=2816, tied=False,
                                           positions="rope", arch="moe", kv_heads=8, experts=16,
                                           experts_per_token=4, shared_experts=2, expert_ffn=512),
                               Layout(micro_batch=2, dp=4, ep=2, zero=3), "", "16GB"),
    "deepseek-v3-dense-first": Case(replace(preset("deepseek-v3"), name="custom", layers=8, dims=tuple(
        (letter, 2 if letter == "L_d" else value) for letter, value in preset("deepseek-v3").dims)),
                             Layout(seq=2048, tp=2, dp=16, ep=8, sp=True, zero=1, global_batch=16), "", "141GB"),
}


def _phase(totals) -> str:
    return totals["verdict_phase"].split(" (chunk ")[0]


def expected(case: Case) -> dict[str, str]:
    """What the page must show: the engine's exact values, formatted by ``numeric``."""
    hand = parse_count(case.params) if case.params else None
    gpu = parse_memory(case.gpu)
    bill = make_bill(case.model, case.layout, params_hand=hand, gpu_memory=gpu)
    totals = bill.totals
    tokens = totals["tokens_per_iteration"]
    # Kaplan's 6N·tokens, N = the layers' weight matrices at the model's own FFN width f
    if case.model.recipe is not None:  # a composed layer, under its registered name
        from symbolic.models.architectures import composed

        kaplan = exact(evaluate("flops.kaplan_training_per_token", arch=composed.register(case.model),
                                context=False), bill.values) * tokens
    elif case.model.arch == "gpt":
        kaplan_n = params.non_embedding_weights(gpt.parameters(ffn=f))
        kaplan = exact(evaluate("flops.per_param_per_token") * kaplan_n, bill.values) * tokens
    else:  # 6 × the weights a token multiplies by (MoE: N_active's), no embeddings
        kaplan = exact(evaluate("flops.kaplan_training_per_token", arch=case.model.arch, context=False),
                       bill.values) * tokens
    out = {
        "out-params-config": f"{totals['params']:,} params",
        "out-params-eq2": f"{totals['params_eq2']:,}",
        "out-psi": f"{totals['params_for_states']:,}",
        "out-states": fmt(totals["model_states_bytes"], "GB"),
        "out-states-gib": fmt(totals["model_states_bytes"], "GiB"),
        "out-activations": fmt(totals["activation_bytes"], "GB"),
        "out-activations-gib": fmt(totals["activation_bytes"], "GiB"),
        "out-flops": fmt(totals["flops_per_iteration"], "TFLOPs"),
        "out-flops-model": fmt(totals["model_flops_per_iteration"], "TFLOPs"),
        "out-flops-kaplan": fmt(kaplan, "TFLOPs"),
        "out-tokens": f"{tokens:,}",
        "out-total": fmt(totals["total_bytes"], "GB"),
        "out-total-gib": fmt(totals["total_bytes"], "GiB"),
        "out-paper-total": fmt(totals["paper_total_bytes"], "GB"),
        "out-comm": fmt(sum(line.value for line in bill.ledger("communication")
                            if line.name.startswith("communication/")), "GB"),
        # the phase; a stage counted by its own layers adds the schedule's moment "(chunk i/n, held: …)",
        # which the page (one averaged stage) has no notion of
        "out-peak-where": (f"{totals['verdict_stage']} stage, {_phase(totals)}" if case.layout.pp > 1
                           else _phase(totals)),
        "out-gpu": fmt(gpu, "GB"),
        "out-headroom": fmt(totals["headroom_bytes"], "GB"),
        "out-verdict": "fits" if totals["headroom_bytes"] >= 0 else "does NOT fit",
    }
    out["out-params-active"] = f"{totals['params_active']:,}" if "params_active" in totals else "–"
    if hand is not None:
        out["out-params-hand"] = f"{hand:,}"
        out["out-params-diff"] = fmt(Rational(hand - totals["params"], totals["params"]), "%")
    return out


#: The page's model fields: typing one switches its menu to "custom" (calculator.html's ``configFields``).
CONFIG_FIELDS = {"L", "h", "a", "V", "s", "f", "tied", "positions", "arch", *html.MODEL_FIELDS}

#: One browser call that enters several fields, as a person would, where typing each one would run the page's
#: ``update()`` twice (its input and change events, ~15 ms each): the page's ``update()`` reads every field
#: and writes only its outputs (calculator.html), so one update after the last field shows what one per field
#: would. Each field must be visible and enabled (as playwright's ``fill``, ``select_option`` and
#: ``set_checked`` require) and must take the value (a menu without that option refuses it, as
#: ``select_option`` does); a field's own listeners beyond ``update()`` still fire for it: a model field's input
#: (the menu switches to "custom"), the optimizer's change (its recipe note).
SET_FIELDS_JS = """([values, config]) => {
  let last = null;
  for (const [id, value] of values) {
    const el = document.getElementById(id);
    if (!el || id === "model") throw new Error(`#${id}: not a field this helper may set`);
    if (!el.checkVisibility() || el.disabled) throw new Error(`#${id} is not visible and enabled`);
    if (el.type === "checkbox") {
      if (el.checked === value) continue;  // set_checked: nothing to click, no event
      el.checked = value;
    } else {
      el.value = value;
      if (el.value !== value) throw new Error(`#${id} does not take ${JSON.stringify(value)}`);
    }
    if (config.includes(id)) el.dispatchEvent(new Event("input", { bubbles: true }));
    if (id === "optimizer") el.dispatchEvent(new Event("change", { bubbles: true }));
    last = el;
  }
  if (last !== null) {
    last.dispatchEvent(new Event("input", { bubbles: true }));
    last.dispatchEvent(new Event("change", { bubbles: true }));
  }
}"""


def _set_fields(page, values: dict) -> None:
    """Enter ``values`` (field id -> text, or a bool for a checkbox) in order, in one call (SET_FIELDS_JS)."""
    page.evaluate(SET_FIELDS_JS, [[[key, value if isinstance(value, bool) else str(value)]
                                   for key, value in values.items()], sorted(CONFIG_FIELDS)])


def fill(page, case: Case) -> None:
    model, layout = case.model, case.layout
    page.select_option("#model", case.preset)
    if case.preset == "custom":
        values = model.values()
        fields = dict(L=model.layers, h=model.hidden, a=model.heads, V=model.vocab, s=model.seq, f=model.ffn)
        _set_fields(page, dict(fields, positions=model.positions, arch=html.page_arch(model)))
        letters = [key for key in html.MODEL_FIELDS if key in values]
        # the letters the inventory uses (the others are hidden, and not read)
        shown = page.evaluate("(ids) => ids.filter((id) => document.getElementById(id).checkVisibility())", letters)
        _set_fields(page, {**{key: values[key] for key in shown}, "tied": model.tied})
    fields = dict(s=layout.seq or model.seq, b=layout.micro_batch, t=layout.tp, p=layout.pp, d=layout.dp,
                  v=layout.interleave, G=layout.iteration_micro_batches(), N=case.params, gpu=case.gpu)
    if page.is_visible("#e"):  # a mixture of experts: the expert-parallel size
        fields["e"] = layout.ep
    fields["sp"] = layout.sp
    fields.update({key: getattr(layout, key) for key in ("optimizer", "zero", "recompute", "dtype", "loss")})
    _set_fields(page, fields)


def _launch_browser():
    """Chromium under playwright, or a skip naming what is missing (never under CI)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing = "the python package playwright (pip install -e '.[browser]')"
    else:
        if Path(CHROMIUM).exists():
            return sync_playwright
        missing = f"{CHROMIUM} (apt-get install chromium)"
    if os.environ.get("CI") == "true":
        pytest.fail(f"browser test needs {missing}; scripts/test installs it")
    pytest.skip(f"browser test needs {missing}")


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    sync_playwright = _launch_browser()
    path = tmp_path_factory.mktemp("calculator") / "calculator.html"
    path.write_text(html.render(preset("gpt-7b"), Layout(micro_batch=4, tp=8, sp=True), 7 * 10**9, 80 * 10**9))
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        tab = browser.new_page()
        errors: list[str] = []
        tab.on("pageerror", lambda error: errors.append(str(error)))
        tab.goto(path.as_uri())
        tab.errors = errors
        yield tab
        browser.close()


def read(page, ids) -> dict[str, str]:
    return {key: page.inner_text(f"#{key}") for key in ids}


def test_the_page_opens_on_the_seed_7b_example(page):
    """No input touched: the defaults are seed 001 §05's Figure 5-1."""
    shown = read(page, expected(SEED_7B))
    assert shown == expected(SEED_7B)
    assert {k: shown[k] for k in SEED_7B.seed} == SEED_7B.seed
    assert page.errors == []


@pytest.mark.parametrize("name", list(CASES))
def test_page_numbers_equal_the_engine(page, name):
    case = CASES[name]
    fill(page, case)
    want = expected(case)
    shown = read(page, want)
    assert shown == want
    assert {k: shown[k] for k in case.seed} == case.seed  # the seed's printed numbers, too
    for key in ("out-states", "out-activations", "out-total", "out-headroom"):
        assert page.get_attribute(f"#{key}", "data-exact") == "true", key
    assert page.get_attribute("body", "data-state") == "ok"
    assert page.errors == []


def test_the_page_names_the_field_of_bad_input(page):
    fill(page, SEED_7B)
    page.fill("#t", "3")
    assert page.inner_text("#error") == ("heads (32) must be divisible by tp (3): "
                                         "choose a tp that divides the head count")
    assert page.inner_text("#out-total") == "–"
    page.fill("#t", "8")
    page.fill("#N", "7 apples")
    assert page.inner_text("#error").startswith('N "7 apples": give a count such as 7B')
    page.fill("#N", "7B")
    assert page.is_hidden("#error") and page.inner_text("#out-paper-total") == "66.08 GB"
    # the verdict: the step's peak — at the loss, transformers' eager loss on the whole vocabulary (gathered)
    assert page.inner_text("#out-total") == "74.57 GB"


@pytest.mark.parametrize("layout", [Layout(tp=8, pp=2, dp=2, zero=2),
                                    Layout(tp=8, pp=4, interleave=2, global_batch=2)])
def test_the_page_refuses_what_every_command_refuses(page, layout):
    """The layout rules (symbolic.layout.layout.LAYOUT_RULES) on the page, in the same words."""
    fill(page, SEED_7B)
    fill(page, Case(preset("gpt-7b"), layout, "7B", preset="gpt-7b"))
    with pytest.raises(ConfigError) as refused:
        layout.validate(preset("gpt-7b"))
    assert page.inner_text("#error") == str(refused.value)


@pytest.mark.parametrize("layout", [Layout(tp=8, zero=1), Layout(sp=True)])
def test_the_page_turns_a_no_op_flag_off_as_every_command_does(page, layout):
    """SP at t = 1 and ZeRO at d·c = 1 change nothing: accepted (layout.settle_no_ops), the same totals."""
    from dataclasses import replace

    fill(page, SEED_7B)
    fill(page, Case(preset("gpt-7b"), replace(layout, sp=False, zero=0), "7B", preset="gpt-7b"))
    plain = page.inner_text("#out-total")
    fill(page, Case(preset("gpt-7b"), layout, "7B", preset="gpt-7b"))
    assert page.is_hidden("#error") and page.inner_text("#out-total") == plain != "–"


def _bill_json(argv, capsys) -> dict:
    import json

    # the page assumes no framework's defaults (it says so under the total): the bill's --framework none
    framework = [] if "--framework" in argv else ["--framework", "none"]
    assert main(["bill", *argv, *framework, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _shown_against_bill(page, data) -> None:
    """The page's numbers and its summary line against ``bill --json`` of the same configuration."""
    from symbolic.render.summary import verdict

    want = {"out-states": fmt(data["model_states_bytes"], "GB"), "out-activations": fmt(data["activation_bytes"], "GB"),
            "out-total": fmt(data["total_bytes"], "GB"), "out-headroom": fmt(data["headroom_bytes"], "GB"),
            "out-params-config": f"{data['params']:,} params", "out-psi": f"{data['params_for_states']:,}",
            "out-flops": fmt(data["flops_per_iteration"], "TFLOPs")}
    assert read(page, want) == want
    assert page.inner_text("#summary-verdict") == verdict(data["total_bytes"], data["gpu_memory_bytes"])
    # the one breakdown: the parts alive at the verdict's instant, in the bill's words and sizes
    from symbolic.render.summary import number, parts_words

    paper = number(data["model_states_bytes"]) + number(data["activation_bytes"])
    assert page.inner_text("#summary-total") == (
        f"total per GPU: {fmt(data['total_bytes'], 'GB')} ({fmt(data['total_bytes'], 'GiB')}) = {parts_words(data)}"
        + ("" if paper == number(data["total_bytes"]) else f"; papers' total {fmt(paper, 'GB')}"))


def test_a_preset_resets_every_field_it_implies(page, capsys):
    """The issue: picking gpt-175b after gpt-7b kept N = 7B (model states 14.00 GB for 175B), and the
    micro-batch, TP and SP of the previous preset. Now the preset sets its N and its published layout."""
    fill(page, SEED_7B)
    page.select_option("#model", "gpt-175b")
    fields = {key: page.input_value(f"#{key}") for key in ("N", "b", "t", "p", "d", "v", "G")}
    assert fields == {"N": "175B", "b": "1", "t": "8", "p": "8", "d": "1", "v": "1", "G": ""}
    assert page.is_checked("#sp")  # Korthikanti Table 3: TP + SP
    # G empty: the bill's default without --global-batch, a pipeline in its steady state (m = p = 8), said so;
    # the loss kernel the bill assumes for a papers' GPT model (Megatron's vocab-parallel)
    assert page.inner_text("#G-note").startswith("G = 8: the pipeline's steady state, m = p = 8")
    assert page.input_value("#loss") == "vocab-parallel"
    _shown_against_bill(page, _bill_json(["gpt-175b", "--tp", "8", "--pp", "8", "--sp", "--params", "175B",
                                          "--gpu-memory", "80GB"], capsys))
    assert page.inner_text("#out-states") == "43.75 GB"  # seed 001 §6: 175B × 16 B / 64
    page.select_option("#model", "llama-2-7b")  # no published layout: one GPU, nothing carried over
    assert [page.input_value(f"#{key}") for key in ("N", "b", "t", "p")] == ["7B", "1", "1", "1"]
    assert not page.is_checked("#sp")
    _shown_against_bill(page, _bill_json(["llama-2-7b", "--params", "7B", "--gpu-memory", "80GB"], capsys))
    page.select_option("#model", "gpt-7b")  # back: the page's own opening configuration
    # the page's own opening configuration was written with Layout()'s eager loss
    assert page.input_value("#loss") == "eager"
    _shown_against_bill(page, _bill_json(["gpt-7b", "--micro-batch", "4", "--tp", "8", "--sp", "--params", "7B",
                                          "--gpu-memory", "80GB", "--loss", "eager"], capsys))
    assert page.errors == []


def test_the_address_reproduces_the_configuration(page):
    """The state is in the URL: opening the link in a fresh tab shows the same numbers."""
    case = CASES["mixtral-pp-selective"]
    fill(page, case)
    want = expected(case)
    url = page.url
    assert "#" in url and "E=8" in url and "p=4" in url and "recompute=selective" in url and "gpu=141GB" in url
    fresh = page.context.browser.new_page()
    fresh.goto(url)
    assert read(fresh, want) == want
    assert fresh.inner_text("#summary-verdict") == page.inner_text("#summary-verdict")
    fresh.close()


def test_a_partial_address_starts_from_its_named_preset(page, capsys):
    """Issue 23: ``#model=llama-3.1-70b`` showed that preset's name with gpt-7b's numbers (L = 32,
    6,670,655,488 parameters, 67.23 GB). A partial address starts from the preset it names: its config,
    N and layout, as choosing it in the menu does; the fields the address gives override them."""
    fresh = page.context.browser.new_page()
    base = page.url.split("#")[0]
    fresh.goto(base + "#model=llama-3.1-70b")
    assert fresh.input_value("#model") == "llama-3.1-70b"
    assert fresh.input_value("#L") == "80" and fresh.input_value("#h") == "8192"
    _shown_against_bill(fresh, _bill_json(["llama-3.1-70b", "--params", fresh.input_value("#N"),
                                           "--gpu-memory", "80GB"], capsys))
    fresh.goto(base + "#model=gpt-175b&t=4")  # the preset's layout (p = 8, SP, N = 175B), t from the address
    fresh.reload()
    assert [fresh.input_value(f"#{key}") for key in ("N", "t", "p")] == ["175B", "4", "8"]
    # G not in the address: empty, the bill's steady state without --global-batch (m = p = 8)
    assert fresh.input_value("#G") == ""
    _shown_against_bill(fresh, _bill_json(["gpt-175b", "--tp", "4", "--pp", "8", "--sp", "--params", "175B",
                                           "--gpu-memory", "80GB"], capsys))
    fresh.goto(base + "#model=gpt-175b&G=1")  # a typed G is the bill's --global-batch b·d·G
    fresh.reload()
    assert fresh.inner_text("#G-note") == "G = 1 micro-batch(es) per iteration: --global-batch 1"
    _shown_against_bill(fresh, _bill_json(["gpt-175b", "--tp", "8", "--pp", "8", "--sp", "--params", "175B",
                                           "--gpu-memory", "80GB", "--global-batch", "1"], capsys))
    fresh.close()


def test_the_summary_comes_first_and_cites_the_bibliography(page):
    fill(page, SEED_7B)
    # the verdict is the step's peak (74.57 GB with the eager loss on the whole vocabulary; the papers' total
    # is 66.08 GB), worded as the bill's summary
    assert page.inner_text("#summary-verdict") == "FITS in 80.00 GB: 74.57 GB per GPU (93.2%), headroom 5.43 GB"
    assert page.inner_text("#summary-dominant") == "dominant: activations 52.08 GB (69.8%)"
    # the summary card is the first thing in the outputs, above step 2
    order = page.evaluate("[...document.querySelectorAll('#outputs > .card')].map(e => e.id || 'step')")
    assert order[0] == "summary"
    assert "[Korthikanti2022]" in page.inner_text("#source-activations")
    assert "arXiv 2205.05198" in page.inner_text("#footer")


#: What docs/images.json records of the README's calculator picture (``screenshot`` writes it, a test
#: compares it with the page the code writes now): the page's text at its defaults, hashed.
CALCULATOR_IMAGE = "docs/calculator.png"


def shown_text_sha256(tab) -> str:
    """SHA-256 of the text a page shows (its body's rendered text: what a picture of it shows, without
    the renderer's pixels)."""
    import hashlib

    return hashlib.sha256(tab.inner_text("body").encode()).hexdigest()


def screenshot(path: str) -> None:
    """The README's picture of the calculator at its defaults; what it shows recorded in docs/images.json
    (``calculator``), beside the sheet's pictures (scripts/docs_images.py keeps the entry)."""
    import json

    from playwright.sync_api import sync_playwright

    page_file = Path(path).with_suffix(".html")
    page_file.write_text(html.render(preset("gpt-7b"), Layout(micro_batch=4, tp=8, sp=True), 7 * 10**9,
                                     80 * 10**9))
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            tab = browser.new_page(viewport={"width": 1280, "height": 900})
            tab.goto(page_file.resolve().as_uri())
            tab.screenshot(path=path, full_page=True)
            shown = shown_text_sha256(tab)
            browser.close()
    finally:
        page_file.unlink()
    if Path(path).resolve() == (ROOT / CALCULATOR_IMAGE).resolve():
        manifest_path = ROOT / "docs" / "images.json"
        manifest = json.loads(manifest_path.read_text())
        manifest["calculator"] = {CALCULATOR_IMAGE: {
            "page": "the calculator at its defaults: gpt-7b, b = 4, t = 8, SP, N = 7B, 80 GB (html.render)",
            "text_sha256": shown}}
        manifest_path.write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")


def test_the_docs_picture_of_the_calculator_is_current(page):
    """Issue 23 item 6: docs/calculator.png shows the page the code writes now — the text of a fresh copy
    of the test's page (the same defaults as the picture's) is what docs/images.json recorded when
    scripts/docs-images took it. Stale: run scripts/docs-images."""
    import json

    stored = json.loads((ROOT / "docs" / "images.json").read_text())["calculator"][CALCULATOR_IMAGE]
    tab = page.context.browser.new_page()
    try:
        tab.goto(page.url.split("#")[0])
        assert tab.get_attribute("body", "data-state") == "ok"
        assert shown_text_sha256(tab) == stored["text_sha256"], "docs/calculator.png is stale: run scripts/docs-images"
    finally:
        tab.close()


if __name__ == "__main__":
    screenshot(sys.argv[1] if len(sys.argv) > 1 else "docs/calculator.png")


def test_the_page_checks_the_llama_and_moe_fields(page):
    gqa = CASES["custom-llama-gqa-tied-full"]
    fill(page, gqa)
    page.fill("#t", "8")
    assert page.inner_text("#error").startswith("key/value heads (4) must be divisible by tp (8)")
    page.fill("#t", "4")
    page.select_option("#positions", "learned")
    assert page.inner_text("#error") == "positions: the LLaMA and MoE layers use rotary positions (RoPE)"
    fill(page, CASES["custom-moe-shared-fp8"])
    page.fill("#k", "17")
    assert page.inner_text("#error") == "experts per token (17) exceeds the number of experts (16)"
    assert page.is_visible("#E") and page.is_visible("#out-params-active")
    fill(page, SEED_7B)
    assert page.is_hidden("#g") and page.is_hidden("#E") and page.inner_text("#out-paper-total") == "66.08 GB"


def test_a_composed_model_on_the_page_equals_bill_json(page, capsys):
    """Issue 10: the composed families are on the page, their numbers those of ``bill --json``."""
    fill(page, SEED_7B)
    page.select_option("#model", "deepseek-v3")
    assert page.input_value("#arch") == html.page_arch(preset("deepseek-v3"))
    assert page.is_visible("#r_kv") and page.is_visible("#L_d") and page.is_hidden("#g") and page.is_hidden("#E_s")
    assert "approximated:" in page.inner_text("#model-source")  # DeepSeek-V3's MTP, stated apart
    for key, value in dict(s="4096", t="8", d="8", G="1").items():
        page.fill(f"#{key}", value)
    page.set_checked("#sp", True)
    page.select_option("#recompute", "full")
    page.select_option("#zero", "1")
    page.fill("#gpu", "141GB")
    assert page.input_value("#N") == "671B"  # its size label, as the seed fills N in
    _shown_against_bill(page, _bill_json(["deepseek-v3", "--seq", "4096", "--tp", "8", "--dp", "8", "--sp",
                                          "--recompute", "full", "--zero", "1", "--params", "671B",
                                          "--gpu-memory", "141GB"], capsys))
    assert page.inner_text("#out-params-config") == "671,026,404,352 params"
    page.select_option("#model", "qwen3-30b-a3b")  # opens on one GPU with its size label as N
    hand = page.input_value("#N")
    page.select_option("#zero", "0")  # the preset sets the layout's sizes, not the policies nor the GPU
    page.select_option("#recompute", "none")
    page.fill("#gpu", "80GB")
    page.fill("#t", "4")
    page.set_checked("#sp", True)
    _shown_against_bill(page, _bill_json(["qwen3-30b-a3b", "--tp", "4", "--sp", "--gpu-memory", "80GB"]
                                         + (["--params", hand] if hand else []), capsys))
    page.select_option("#model", "deepseek-v3")
    page.fill("#L_d", "62")  # the page's own rule for a letter the reader takes from the config
    assert page.inner_text("#error") == "dense layers (62) must be at most the layers (61)"
    assert page.errors == []


def test_every_inventory_on_the_page_is_the_bills(tmp_path):
    """Without a browser: each page inventory's parameter count, first-stage activations and hardware
    FLOPs at a layout equal the bill's, for every built-in model and HF's GPT-2 (its own inventory:
    gelu_new, a table of n_positions rows)."""
    from symbolic.core.dims import SYMBOLS
    from symbolic.core.numeric import exact
    from symbolic.models import hf

    gpt2 = hf.from_hf_dict({"model_type": "gpt2", "n_layer": 4, "n_embd": 256, "n_head": 8, "vocab_size": 1000,
                            "n_positions": 512}, "gpt2-tiny")
    models = html.page_models((gpt2,))
    assert html.page_arch(gpt2) in models
    items = {item.key: item for item in html.formulas(models)}
    # n_inner null is 4h: the page's formulas keep the letter f, which the page's FFN field sets
    assert f in items[f"{html.page_arch(gpt2)}:params/tied/learned"].expr.free_symbols
    for model in (*PRESETS.values(), gpt2):
        arch = html.page_arch(model)
        prefix = "" if arch == "gpt" else arch + ":"
        pp = 2 if model.layers % 2 == 0 else 1  # GPT-530B's 105 layers, DeepSeek-V3's 61
        layout = Layout(seq=min(model.seq, 512), tp=2, pp=pp, sp=True, recompute="selective", global_batch=4)
        bill = make_bill(model, layout)
        values = {SYMBOLS[name]: value for name, value in bill.values.items()} | {
            html.G: layout.iteration_micro_batches(), SYMBOLS["m"]: layout.in_flight("first"),
            SYMBOLS["E_s"]: bill.values.get("E_s", 0)}
        tied = "tied" if model.tied else "untied"
        assert exact(items[f"{prefix}params/{tied}/{model.positions}"].expr, values) == bill.totals["params"], model.name
        acts = items[prefix + html.activation_key(True, "selective", "1f1b" if pp > 1 else "none", "bf16")].expr
        assert exact(acts, values) == bill.totals["activation_bytes"], model.name
        flops = items[f"{prefix}flops/hardware/selective"].expr
        assert exact(flops, values) == bill.totals["flops_per_iteration"], model.name
        if model.experts:  # the expert grid at e = 2: states, the EP all-to-all's buffers, activations
            layout = Layout(seq=min(model.seq, 512), tp=2, dp=2, ep=2, sp=True, zero=1)
            bill = make_bill(model, layout)
            values = {SYMBOLS[name]: value for name, value in bill.values.items()} | {
                html.G: 1, SYMBOLS["m"]: 1, SYMBOLS["E_s"]: bill.values.get("E_s", 0)}
            states = exact(items[f"{prefix}states/bf16-adam/1"].expr, values | {SYMBOLS["Psi"]: bill.totals["params"]})
            assert states == bill.totals["model_states_bytes"], model.name
            comm = sum(line.value for line in bill.ledger("communication") if line.name.startswith("communication/"))
            assert exact(items[f"{prefix}comm/sp"].expr, values) == comm, model.name
            acts = items[prefix + html.activation_key(True, "none", "none", "bf16")].expr
            assert exact(acts, values) == bill.totals["activation_bytes"], model.name


def test_the_calculator_takes_expert_parallelism(tmp_path, capsys):
    """--ep is a page input for a mixture of experts; what the page cannot express (its own e_t, a
    capacity factor) and --ep on a dense model are one line each, exit 2."""
    out = tmp_path / "ep.html"
    assert main(["calculator", "--model", "mixtral-8x7b", "--tp", "2", "--dp", "4", "--ep", "4", "-o", str(out)]) == 0
    capsys.readouterr()
    assert '"e": 4' in out.read_text()
    for argv, words in ((["--model", "mixtral-8x7b", "--tp", "2", "--dp", "4", "--ep", "4", "--etp", "1"],
                         "--etp 1: the calculator page splits each expert's width over the tensor-parallel ranks"),
                        (["--model", "mixtral-8x7b", "--moe-capacity-factor", "1.25"], "--moe-capacity-factor"),
                        (["--model", "gpt-7b", "--ep", "2"], "apply to mixture-of-experts models"),
                        (["--model", "mixtral-8x7b", "--tp", "2", "--ep", "3"], "ep (3) must divide the routed experts")):
        assert main(["calculator", *argv, "-o", str(tmp_path / "x.html")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and words in err[0], err


def test_the_page_checks_expert_parallelism_in_the_bills_words(page):
    fill(page, CASES["mixtral-ep4-zero1"])
    assert page.get_attribute("body", "data-state") == "ok"
    for value, layout in (("3", Layout(seq=4096, tp=2, dp=4, ep=3, sp=True)),
                          ("8", Layout(seq=4096, tp=2, dp=4, ep=8, sp=True))):
        page.fill("#e", value)
        with pytest.raises(ConfigError) as refused:
            layout.validate(preset("mixtral-8x7b"))
        assert page.inner_text("#error") == str(refused.value)
    fill(page, SEED_7B)
    assert page.is_hidden("#e")


def test_dense_first_layers_across_stages_are_named_an_approximation(page):
    """With p > 1 the page averages DeepSeek's dense-first layers per stage while the bill counts each
    stage's own layers: the page says so (and with p = 1, where the two agree, it says nothing)."""
    case = CASES["deepseek-v3-dense-first"]
    fill(page, case)
    assert page.locator("#out-stage-mix").is_hidden()
    fill(page, Case(case.model, replace(case.layout, pp=2, dp=8), case.params, case.gpu))
    note = page.locator("#out-stage-mix")
    assert note.is_visible() and "averaged over the 2 stages" in note.text_content()


#: The page's fine-tuning and offload controls (field -> value) and the same run as ``bill`` options.
LEVER_CASES = (
    ({"lora": "16"}, ["--lora", "16"]),
    ({"lora": "16", "base_dtype": "nf4"}, ["--lora", "16", "--base-dtype", "nf4"]),
    ({"lora": "8", "base_dtype": "nf4", "double_quant": False, "d": "4", "zero": "3"},
     ["--lora", "8", "--base-dtype", "nf4", "--no-double-quant", "--dp", "4", "--zero", "3"]),
    ({"lora": "16", "base_dtype": "int8", "t": "2", "p": "2", "recompute": "full"},
     ["--lora", "16", "--base-dtype", "int8", "--tp", "2", "--pp", "2", "--recompute", "full"]),
    ({"offload": "optimizer", "d": "2", "zero": "1"}, ["--offload", "optimizer", "--dp", "2", "--zero", "1"]),
    ({"offload": "params", "lora": "8", "d": "2", "zero": "3"},
     ["--offload", "params", "--lora", "8", "--dp", "2", "--zero", "3"]),
    ({"activation_offload": True, "t": "2", "sp": True}, ["--activation-offload", "--tp", "2", "--sp"]),
    # issue 39: LoRA freezes the output layer, so Liger's loss keeps and allocates no V·h weight gradient
    ({"lora": "16", "base_dtype": "nf4", "loss": "liger", "recompute": "full"},
     ["--lora", "16", "--base-dtype", "nf4", "--loss", "liger", "--recompute", "full"]),
)


def _set(page, values: dict) -> None:
    _set_fields(page, values)


def test_lora_qlora_and_offload_on_the_page_equal_bill_json(page, capsys):
    """Issue 23: LoRA, QLoRA and (activation) offload on the page, from the bill's own terms
    (``html.lever_formulas``), driven through the page's controls and compared with ``bill --json``."""
    reset = {"lora": "0", "base_dtype": "bf16", "double_quant": True, "offload": "none", "activation_offload": False,
             "optimizer": "bf16-adam", "zero": "0", "recompute": "none", "dtype": "bf16", "gpu": "80GB", "loss": "eager"}
    for controls, options in LEVER_CASES:
        page.select_option("#model", "llama-3-8b")  # one GPU, its size label as N
        _set(page, reset)
        _set(page, controls)
        assert page.get_attribute("body", "data-state") == "ok", page.inner_text("#error")
        hand = page.input_value("#N")
        # the page's loss kernel as the reset set it (the bill's default under TP is vocabulary-parallel)
        data = _bill_json(["llama-3-8b", *options, "--gpu-memory", "80GB", "--loss", page.input_value("#loss")]
                          + (["--params", hand] if hand else []), capsys)
        _shown_against_bill(page, data)
        assert page.inner_text("#out-flops-model") == fmt(data["model_flops_per_iteration"], "TFLOPs"), options
        if "--lora" in options:  # the adapters' count, from the inventory
            rank = int(options[options.index("--lora") + 1])
            # q, o: h×h; k, v: h×g·d_h; gate, up, down: h×f — r·(d_in + d_out) each, L = 32 layers
            per_layer = 2 * (4096 + 4096) + 2 * (4096 + 1024) + 3 * (4096 + 14336)
            assert page.inner_text("#out-trainable") == f"{rank * 32 * per_layer:,}"
    # activation offload on any inventory: a mixture of experts on its expert grid
    page.select_option("#model", "mixtral-8x7b")
    _set(page, reset)
    _set(page, {"s": "4096", "t": "2", "d": "4", "e": "4", "sp": True, "zero": "1", "activation_offload": True})
    hand = page.input_value("#N")
    _shown_against_bill(page, _bill_json(["mixtral-8x7b", "--seq", "4096", "--tp", "2", "--dp", "4", "--ep", "4",
                                          "--sp", "--zero", "1", "--activation-offload", "--gpu-memory", "80GB"]
                                         + (["--params", hand] if hand else []), capsys))
    _set(page, reset)
    page.fill("#lora", "16")
    page.select_option("#model", "mixtral-8x7b")  # LoRA is priced for the LLaMA inventory only: said, not guessed
    assert page.inner_text("#error").startswith("LoRA and offload: this page prices them for the LLaMA")
    page.fill("#lora", "0")
    page.select_option("#model", "llama-3-8b")
    page.select_option("#base_dtype", "nf4")
    with pytest.raises(ConfigError) as refused:
        Layout(base_dtype="nf4").validate(preset("llama-3-8b"))
    assert page.inner_text("#error") == str(refused.value)
    _set(page, reset)
    assert page.errors == []


def test_the_calculator_command_opens_with_lora_and_refuses_what_the_page_cannot_price(tmp_path, capsys):
    out = tmp_path / "qlora.html"
    assert main(["calculator", "--model", "llama-3-8b", "--lora", "16", "--base-dtype", "nf4",
                 "-o", str(out)]) == 0
    capsys.readouterr()
    text = out.read_text()
    assert '"lora": 16' in text and '"base_dtype": "nf4"' in text
    for argv, words in ((["--model", "mixtral-8x7b", "--lora", "16"], "LLaMA inventory only"),
                        (["--model", "llama-3-8b", "--lora", "16", "--lora-targets", "attention"],
                         "--lora-targets")):
        assert main(["calculator", *argv, "-o", str(tmp_path / "x.html")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and words in err[0], err


def test_the_loss_selector_equals_bill_json(page, capsys):
    """Issue 23: ``--loss`` on the page, each kernel's output side and work tensors from the bill's own
    terms (``html.LOSS_TERMS`` keyed ``@KERNEL``), against ``bill --json``; a kernel without a vocabulary
    split at t > 1 is refused in the bill's words."""
    page.select_option("#model", "llama-3-8b")
    _set(page, {"lora": "0", "base_dtype": "bf16", "offload": "none", "activation_offload": False,
                "optimizer": "bf16-adam", "zero": "0", "recompute": "full", "dtype": "bf16", "gpu": "80GB"})
    hand = page.input_value("#N")
    for loss in html.LOSS_KERNELS:
        page.select_option("#loss", loss)
        data = _bill_json(["llama-3-8b", "--loss", loss, "--recompute", "full", "--gpu-memory", "80GB"]
                          + (["--params", hand] if hand else []), capsys)
        _shown_against_bill(page, data)
    page.fill("#t", "2")
    with pytest.raises(ConfigError) as refused:
        Layout(tp=2, loss="liger").validate(preset("llama-3-8b"))
    assert page.inner_text("#error") == str(refused.value)
    page.select_option("#loss", "vocab-parallel")
    data = _bill_json(["llama-3-8b", "--tp", "2", "--recompute", "full", "--loss", "vocab-parallel",
                       "--gpu-memory", "80GB"] + (["--params", hand] if hand else []), capsys)
    _shown_against_bill(page, data)
    page.fill("#t", "1")
    page.select_option("#model", "qwen3-8b")  # a composed family's own inventory, a pipeline in its steady state
    _set(page, {"s": "4096", "p": "2", "recompute": "selective", "loss": "chunked"})
    hand = page.input_value("#N")
    _shown_against_bill(page, _bill_json(["qwen3-8b", "--seq", "4096", "--pp", "2", "--recompute", "selective",
                                          "--loss", "chunked", "--gpu-memory", "80GB"]
                                         + (["--params", hand] if hand else []), capsys))
    assert page.errors == []


def test_the_pages_steady_state_is_the_bills():
    """The page's G without a global batch (``steady/G``) is ``steady_state_batch``'s micro-batches per rank."""
    from symbolic.core.numeric import exact as exact_value
    from symbolic.layout.layout import steady_state_batch

    item = next(item for item in html.verdict_formulas() if item.key == "steady/G")
    for pp, b, dp in ((1, 4, 2), (2, 1, 1), (8, 2, 4), (35, 1, 3)):
        batch = steady_state_batch(0, pp, b, dp) or b * dp
        assert exact_value(item.expr, {"p": pp}) == batch // (b * dp)
        assert html._g_field(Layout(micro_batch=b, pp=pp, dp=dp, global_batch=steady_state_batch(0, pp, b, dp))) == ""
    assert html._g_field(Layout(pp=4, global_batch=8)) == 8


def test_the_calculator_takes_gpu(tmp_path, capsys):
    """``calculator --gpu h200`` opens the page on the H200's memory, as ``bill --gpu h200`` compares against."""
    import json as _json

    path = tmp_path / "page.html"
    assert main(["calculator", "--gpu", "h200", "--output", str(path)]) == 0
    capsys.readouterr()
    assert '"gpu": "141GB"' in path.read_text()
    assert main(["bill", "gpt-7b", "--gpu", "h200", "--json"]) == 0
    assert _json.loads(capsys.readouterr().out)["gpu_memory_bytes"] == 141 * 10**9
    assert main(["calculator", "--gpu", "h900", "--output", str(path)]) == 2
    assert "unknown GPU" in capsys.readouterr().err


# --- the step time: the bill's price() printed on symbols (html.page_time) ---------------------------

#: (page controls after choosing the preset, the same as ``bill`` options, the page's GPU): a pipeline, TP
#: with SP, ZeRO-3 with full recompute, a mixture of experts over e ranks, QLoRA, interleaving, composed
#: families (Qwen3; DeepSeek-V3's MLA experts over e = 8; Gemma-2's sandwich norms); the B200
#: prices its in-node collectives from SimuMax's measurements, the A100 and H100/H200 borrow tables.
TIME_CASES = (
    ("gpt-175b", {}, ["--tp", "8", "--pp", "8", "--sp", "--params", "175B"], "h100-sxm"),
    ("llama-3-8b", {"t": "2", "d": "4", "sp": True, "zero": "1"},
     ["--tp", "2", "--dp", "4", "--sp", "--zero", "1"], "b200"),
    ("llama-3-8b", {"t": "2", "p": "2", "d": "2", "G": "8", "recompute": "selective"},
     ["--tp", "2", "--pp", "2", "--dp", "2", "--global-batch", "16", "--recompute", "selective"], "b200"),
    ("llama-3-8b", {"d": "8", "zero": "3", "recompute": "full", "b": "2"},
     ["--dp", "8", "--zero", "3", "--recompute", "full", "--micro-batch", "2"], "a100-80gb"),
    ("mixtral-8x7b", {"s": "4096", "t": "2", "d": "4", "e": "4", "sp": True, "zero": "1"},
     ["--seq", "4096", "--tp", "2", "--dp", "4", "--ep", "4", "--sp", "--zero", "1"], "b200"),
    ("llama-3-8b", {"lora": "16", "base_dtype": "nf4", "d": "2"}, ["--lora", "16", "--base-dtype", "nf4", "--dp", "2"],
     "h100-sxm"),
    # offload and activation offload beside QLoRA: three not-priced lines, in the bill's order
    ("llama-3-8b", {"lora": "16", "base_dtype": "nf4", "d": "2", "offload": "optimizer", "activation_offload": True},
     ["--lora", "16", "--base-dtype", "nf4", "--dp", "2", "--offload", "optimizer", "--activation-offload"], "h100-sxm"),
    ("gpt-175b", {"v": "2", "G": "16"}, ["--tp", "8", "--pp", "8", "--sp", "--params", "175B", "--interleave", "2",
                                          "--global-batch", "16"], "h200"),
    ("qwen3-8b", {"p": "2", "d": "2", "recompute": "full"}, ["--pp", "2", "--dp", "2", "--recompute", "full"],
     "a100-80gb"),
    ("deepseek-v3", {"t": "4", "d": "8", "e": "8", "sp": True, "zero": "1"},
     ["--tp", "4", "--dp", "8", "--ep", "8", "--sp", "--zero", "1"], "b200"),
    ("gemma-2-9b", {"t": "2", "sp": True}, ["--tp", "2", "--sp"], "h200"),
    # the GB200's NVLink domain of 72 (its own class: a ring of 16 at stride 8 crosses nodes of 9), the
    # A100-40GB and the H800 on their classes' functions (the A100-80GB's, the H100's) with their own figures
    ("llama-3-8b", {"t": "8", "d": "16", "sp": True, "zero": "1"}, ["--tp", "8", "--dp", "16", "--sp", "--zero", "1"],
     "gb200-nvl72"),
    ("llama-3-8b", {"d": "8", "zero": "3", "recompute": "full", "b": "2"},
     ["--dp", "8", "--zero", "3", "--recompute", "full", "--micro-batch", "2"], "a100-40gb"),
    ("gpt-175b", {}, ["--tp", "8", "--pp", "8", "--sp", "--params", "175B"], "h800"),
)
TIME_RESET = {"lora": "0", "base_dtype": "bf16", "double_quant": True, "offload": "none", "activation_offload": False,
              "optimizer": "bf16-adam", "zero": "0", "recompute": "none", "dtype": "bf16"}


def _relative(x: float, y: float) -> float:
    return abs(x - y) / max(abs(x), abs(y), 1e-300)


def test_the_step_time_on_the_page_equals_bill_json(page, capsys):
    """Issue 23 item 5: the page's step time, tokens/s, MFU and every part of the breakdown are
    ``bill --json``'s, to 1e-9 relative (the page evaluates the same expressions in doubles, summing in
    ``price``'s order; sympy's printed constants round-trip, its reassociation of a sum may not)."""
    from symbolic.ledgers.hardware import builtin

    for name, controls, options, gpu in TIME_CASES:
        page.select_option("#model", name)
        _set(page, {**TIME_RESET, "gpu": "80GB"})
        _set(page, {**controls, "hardware": gpu})
        assert page.get_attribute("body", "data-state") == "ok", page.inner_text("#error")
        hand = page.input_value("#N")
        argv = [name, *options, "--gpu", gpu] + (["--params", hand] if hand and "--params" not in options else [])
        if "--loss" not in options:  # the page's loss kernel, as its controls left it
            argv += ["--loss", page.input_value("#loss")]
        data = _bill_json(argv, capsys)
        assert _relative(float(page.get_attribute("#out-step", "data-value")), data["step_seconds"]) < 1e-9, name
        assert _relative(float(page.get_attribute("#out-tokens-per-s", "data-value")), data["tokens_per_second"]) < 1e-9
        assert _relative(float(page.get_attribute("#out-mfu", "data-value")), data["mfu"]) < 1e-9
        assert _relative(float(page.get_attribute("#out-hfu", "data-value")), data["hfu"]) < 1e-9
        shown = {el.get_attribute("id")[len("out-time-"):]: float(el.get_attribute("data-value"))
                 for el in page.query_selector_all("#out-time-parts li")}
        want = {k: v for k, v in data["time_breakdown"].items() if v > 0}
        assert set(shown) == set(want), (name, shown, want)
        for key, value in want.items():
            assert _relative(shown[key], value) < 1e-9, (name, key, shown[key], value)
        # the hardware and the kernel tables named as the bill's TIME section names them
        hw = builtin()[gpu]
        described = page.inner_text("#time-hardware")
        assert described.startswith(hw.describe()) and data["time_model"]["kernels"] in described
        assert data["time_model"]["hardware"] == hw.name and hw.name in page.inner_text("#summary-time")
        # what the bill leaves out of this step time (timing.not_priced), in its words, and nothing else
        lines = data["time_model"]["not_priced"]
        assert page.inner_text("#time-not-priced") == ("not priced: " + "; ".join(lines) if lines else ""), name
        assert "NaN" not in page.inner_text("#outputs") and "Infinity" not in page.inner_text("#outputs")
    assert page.errors == []


def test_the_page_says_where_it_does_not_price_the_step_time(page):
    """A choice outside the page's priced set (an optimizer recipe, an activation dtype) is one line, never
    a number from another choice, never NaN."""
    page.select_option("#model", "llama-3-8b")
    _set(page, {**TIME_RESET, "gpu": "80GB", "hardware": "h100-sxm", "optimizer": "fp32-adam"})
    assert page.get_attribute("body", "data-state") == "ok"
    assert page.inner_text("#out-step") == "–"
    note = page.inner_text("#time-not-priced")
    assert note.startswith("not priced on this page for fp32-adam / bf16 / the eager loss") and "symbolic bill --gpu h100-sxm" in note
    assert page.inner_text("#summary-time") == "step time: " + note
    _set(page, {"optimizer": "bf16-adam"})
    assert page.inner_text("#out-step") != "–" and page.inner_text("#time-not-priced") == ""
    page.fill("#t", "3")  # bad input: no step time left over from the last good one
    assert page.get_attribute("body", "data-state") == "error"
    assert page.inner_text("#out-step") == "–" and page.get_attribute("#out-step", "data-value") is None
    page.fill("#t", "1")
    assert page.errors == []


def test_the_pages_nearest_rule_is_table_nearest(page):
    """The page's ``nearestEfficiency`` over each embedded table equals ``Table.nearest`` on the same rows,
    at random shapes and at a tie (a shape midway in log space between two rows: the first row wins)."""
    import random

    from symbolic.ledgers.kernels import Table

    tables = page.evaluate("TIME.tables")
    rng = random.Random(5)
    for rows, efficiencies in tables:
        table = Table(tuple(tuple(r) for r in rows), tuple(efficiencies))
        shapes = [tuple(rng.choice([1, 3, 64, 512, 1000, 2048, 4096, 6144, 8192, 14336, 32768, 131072])
                        for _ in rows[0]) for _ in range(12)]
        got = page.evaluate("(shapes) => shapes.map((s) => nearestEfficiency(ID, ...s))".replace(
            "ID", str(tables.index([rows, efficiencies]))), shapes)
        assert got == [table.nearest(*shape) for shape in shapes]
    tie = page.evaluate("() => { TIME.tables.push([[[4096, 4096, 4096], [1024, 1024, 1024]], [0.25, 0.75]]);"
                        " const v = nearestEfficiency(TIME.tables.length - 1, 2048, 2048, 2048); TIME.tables.pop(); return v; }")
    assert tie == Table(((4096, 4096, 4096), (1024, 1024, 1024)), (0.25, 0.75)).nearest(2048, 2048, 2048) == 0.25


def test_the_memory_bar_draws_every_verdict_part(page, capsys):
    """Issue 23 item 6: the bar's segments are the summary's parts (``summary.bar_parts``), in order and size."""
    from symbolic.render.summary import bar_parts, number

    fill(page, SEED_7B)  # the seed's 7B example: its peak at the loss, five parts alive
    _set(page, {"loss": "eager"})
    data = _bill_json(["gpt-7b", "--micro-batch", "4", "--tp", "8", "--sp", "--params", "7B", "--gpu-memory", "80GB",
                       "--loss", "eager"], capsys)
    segments = [(el.get_attribute("data-part"), float(el.get_attribute("data-bytes")))
                for el in page.query_selector_all("#bar [data-part]")]
    want = bar_parts(data)
    assert [cls for cls, _ in segments] == [("model_states" if kind == "states" else kind) for kind, _, _ in want]
    for (_, size), (_, _, bytes_) in zip(segments, want):
        assert _relative(size, float(number(bytes_))) < 1e-12
    assert len(segments) == 5
    assert page.errors == []


def test_the_calculator_opens_the_step_time_on_any_gpu_the_bill_takes(tmp_path, capsys):
    """``calculator --gpu b200`` opens the step time on the B200, ``--gpu gb200`` (an alias) on the GB200 NVL72;
    the menu offers every hardware file (as ``bill --gpu`` takes them); without --gpu the bill's default,
    A100-80GB."""
    from symbolic.ledgers.hardware import names

    path = tmp_path / "page.html"
    assert main(["calculator", "--gpu", "b200", "--output", str(path)]) == 0
    capsys.readouterr()
    text = path.read_text()
    assert '"hardware": "b200"' in text and '"gpu": "180GB"' in text
    assert main(["calculator", "--gpu", "gb200", "--output", str(path)]) == 0
    text = path.read_text()
    assert '"hardware": "gb200-nvl72"' in text and '"gpu": "186GB"' in text
    gpus = text[text.index("  gpus: {"):].split("\n", 1)[0]
    assert all(f'"{name}": {{"name": ' in gpus for name in names())
    assert main(["calculator", "--output", str(path)]) == 0
    assert '"hardware": "a100-80gb"' in path.read_text()
