"""The loss as a kernel choice (``--loss``): each kernel's saved and work tensors, read from its code
(``symbolic.models.architectures.output``), traced on CPU where the kernel runs there (transformers'
eager loss: tests/test_llama.py; torchtune's chunked loss: here), and carried through the bill, the
plan, solve and the timeline."""
import json

import pytest

from symbolic.cli import main
from symbolic.layout.layout import Layout, default_loss
from symbolic.ledgers import activations
from symbolic.models.architectures import output
from symbolic.models.builtin import preset
from symbolic.models.config import ConfigError
from symbolic.models.losses import LOSS_KERNELS
from tests._tracing import at, require

S, B, H, VV = 4096, 2, 4096, 128256  # Llama-3-8B's width and vocabulary


def _bytes(terms, **values):
    return at(activations.total_bytes(terms), **values)


def _saved(loss):
    return _bytes(output.loss_saved(loss), s=S, b=B, h=H, V=VV)


def _work(loss):
    return _bytes(output.loss_work(loss), s=S, b=B, h=H, V=VV)


def test_each_kernel_keeps_what_its_code_saves():
    sbv = S * B * VV
    # transformers: fp32 log-softmax, int64 targets, nll_loss's fp32 total weight
    assert _saved("eager") == 4 * sbv + 8 * S * B + 4
    # Megatron: save_for_backward(exp_logits fp32, target_mask bool, masked_target_1d int64)
    assert _saved("vocab-parallel") == 4 * sbv + S * B + 8 * S * B
    # flash-attn: save_for_backward(logits bf16, lse fp32, labels int64)
    assert _saved("fused") == 2 * sbv + 4 * S * B + 8 * S * B
    # torchtune (uncompiled): every chunk's fp32 log-softmax, the targets, a total weight per chunk
    assert _saved("chunked") == 4 * sbv + 8 * S * B + 4 * 8
    # Liger: grad_input (s·b·h bf16) and grad_weight (V·h bf16) computed in the forward
    assert _saved("liger") == 2 * S * B * H + 2 * VV * H


def test_each_kernel_works_in_what_its_code_allocates():
    sbv = S * B * VV
    assert _work("eager") == 2 * sbv + 4 * sbv                  # bf16 logits + fp32 gradient
    assert _work("vocab-parallel") == 2 * sbv + 3 * 4 * S * B    # one bf16 s·b·V tensor + 3 fp32 row stats
    assert _work("fused") == 2 * sbv + 2 * 4 * S * B             # dlogits (bf16) + losses, z_losses
    assert _work("chunked") == 2 * sbv + 4 * (S // 8) * B * VV   # bf16 logits + one chunk's fp32 upcast
    # Liger: chunk rows next_power_of_2(ceil(BT/ceil(V/H))) = 256 at these sizes; the bill's bound 2x the
    # unrounded count, 2·ceil(8192/32) = 512 rows; the weight-gradient step's V·h bf16 and fp32 copies
    rows = 2 * -(-S * B // -(-VV // H))
    assert rows == 512
    assert _work("liger") == 2 * rows * VV + 6 * VV * H + 4 * S * B


def test_only_liger_drops_the_output_projections_saved_input():
    for loss in LOSS_KERNELS:
        names = output.saved_tensors(loss=loss).names()
        assert ("output/logits_input" in names) == (loss != "liger")


def test_the_chunked_loss_traced_on_cpu_keeps_what_the_inventory_says():
    torch = require("torch")
    require("transformers")
    from transformers.models.llama.modeling_llama import LlamaRMSNorm

    from symbolic import trace as tr

    class ChunkedHead(torch.nn.Module):
        """torchtune's chunked output (TransformerDecoder with num_output_chunks = 8) and
        CEWithChunkedOutputLoss uncompiled: each token chunk projected, upcast and cross-entropied."""

        def __init__(self, hidden, vocab):
            super().__init__()
            self.norm = LlamaRMSNorm(hidden)
            self.output = torch.nn.Linear(hidden, vocab, bias=False)

        def forward(self, x, targets):
            hidden = self.norm(x)
            chunks = [self.output(chunk) for chunk in hidden.tensor_split(8, dim=1)]
            labels = [chunk.reshape(-1) for chunk in targets.tensor_split(8, dim=1)]
            total = 0.0
            for logits, target in zip(chunks, labels):
                total = total + torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(),
                                                                  target, reduction="sum")
            return total / targets.numel()

    for s, b, h, v in ((16, 2, 32, 100), (24, 3, 24, 77)):
        head = ChunkedHead(h, v).to(torch.bfloat16)
        x = torch.randn(b, s, h, dtype=torch.bfloat16, requires_grad=True)
        targets = torch.randint(0, v, (b, s))
        got = tr.trace_module(head, (x, targets))
        inv = output.saved_tensors(loss="chunked")
        want = at(activations.total_bytes(inv), s=s, b=b, h=h, V=v)
        assert got.saved_bytes + sum(r.bytes for r in got.shared) == want


def test_the_papers_models_default_to_megatrons_loss_an_hf_model_to_transformers():
    assert default_loss(preset("gpt-175b")) == "vocab-parallel"
    assert default_loss(preset("llama-3-8b")) == "eager"


def test_a_kernel_without_a_vocabulary_split_is_refused_under_tensor_parallelism():
    model = preset("llama-3-8b")
    for loss in ("liger", "chunked"):
        with pytest.raises(ConfigError, match=f"loss {loss} with tp 2"):
            Layout(tp=2, loss=loss).validate(model)
    with pytest.raises(ConfigError, match="loss must be one of"):
        Layout(loss="cut").validate(model)


def _bill(capsys, *argv):
    code = main(["bill", *argv, "--json"])
    out, _ = capsys.readouterr()
    assert code == 0
    return json.loads(out)


def test_the_bill_prices_the_loss_by_kernel(capsys):
    base = ("llama-3-8b", "--seq", "8192", "--dp", "8", "--zero", "3", "--gpu-memory", "80GB")
    totals = {loss: _bill(capsys, *base, "--loss", loss) for loss in LOSS_KERNELS}
    assert totals["eager"]["layout"]["loss"] == "eager"
    assert _bill(capsys, *base)["total_bytes"] == totals["eager"]["total_bytes"]  # an HF model's default
    sbv = 8192 * 128256
    for loss in LOSS_KERNELS:
        assert totals[loss]["verdict_phase"] == "loss"
    # at the loss instant: the saved output side and the work tensors, kernel by kernel
    eager = totals["eager"]["total_bytes"]
    assert eager - totals["fused"]["total_bytes"] == (4 * sbv + 8192 * 8 + 4 + 6 * sbv) - (
        2 * sbv + 12 * 8192 + 2 * sbv + 8 * 8192)
    assert totals["fused"]["total_bytes"] < totals["vocab-parallel"]["total_bytes"] < eager
    assert totals["chunked"]["total_bytes"] < eager


def test_plan_solve_and_timeline_take_the_kernel(capsys):
    code = main(["plan", "llama-3-8b", "--gpus", "8", "--gpu-memory", "80GB", "--seq", "4096",
                 "--global-batch", "64", "--loss", "liger", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and data["loss"] == "liger" and data["layouts"]
    assert all(row["tp"] == 1 and row["loss"] == "liger" for row in data["layouts"])
    code = main(["solve", "llama-3-8b", "--max", "seq", "--gpu-memory", "80GB", "--dp", "8", "--zero", "3",
                 "--loss", "fused", "--json"])
    fused = json.loads(capsys.readouterr().out)
    code = main(["solve", "llama-3-8b", "--max", "seq", "--gpu-memory", "80GB", "--dp", "8", "--zero", "3",
                 "--json"])
    eager = json.loads(capsys.readouterr().out)
    assert fused["layout"]["loss"] == "fused" and fused["largest_integer"] > eager["largest_integer"]
    code = main(["timeline", "llama-3-8b", "--seq", "2048", "--loss", "fused", "--json"])
    assert code == 0 and json.loads(capsys.readouterr().out)["layout"]["loss"] == "fused"


def test_liger_with_a_frozen_output_weight_keeps_and_allocates_no_weight_gradient():
    # liger-kernel 0.8.5 fused_linear_cross_entropy_forward: grad_weight is None when the weight does
    # not require grad, and the weight-gradient step (its V·h bf16 mm and fp32 copy) is skipped
    frozen_saved = _bytes(output.loss_saved("liger", weight_grad=False), s=S, b=B, h=H, V=VV)
    frozen_work = _bytes(output.loss_work("liger", weight_grad=False), s=S, b=B, h=H, V=VV)
    assert _saved("liger") - frozen_saved == 2 * VV * H
    assert frozen_saved == 2 * S * B * H
    assert _work("liger") - frozen_work == 6 * VV * H
    # the other kernels keep no weight gradient: unchanged
    for loss in LOSS_KERNELS[:-1]:
        assert output.loss_saved(loss, weight_grad=False) == output.loss_saved(loss)
        assert output.loss_work(loss, weight_grad=False) == output.loss_work(loss)


def test_the_lora_bill_under_liger_drops_the_output_weights_gradient(capsys):
    # LoRA freezes the output layer: Liger's output side loses its V·h bf16 grad_weight, and the loss
    # instant's work tensors the weight-gradient step's V·h bf16 mm and fp32 copy
    from symbolic.bill.derive import inventories
    from symbolic.ledgers.peak import step_terms

    model = preset("llama-3.1-70b")
    h, v = model.hidden, model.vocab
    base = ("llama-3.1-70b", "--seq", "1024", "--recompute", "full", "--gpu-memory", "80GB", "--loss", "liger")
    full = _bill(capsys, *base)
    lora = _bill(capsys, *base, "--lora", "16", "--base-dtype", "nf4")
    # and, the final RMSNorm's weight frozen too, its x·rstd (2sbh), kept only for that weight's gradient
    assert full["output_side_bytes"] - lora["output_side_bytes"] == 2 * v * h + 2 * 1024 * h == 2_118_123_520
    assert lora["output_side_bytes"] == 50_335_744  # final norm's fp32 input and rstd; grad_input
    assert "output/grad_weight" not in {line["name"] for line in lora["lines"]}
    assert "output/grad_weight" in {line["name"] for line in full["lines"]}
    _, saved, _ = inventories(model)
    work = {}
    for lora_rank in (0, 16):
        strategy = Layout(seq=1024, recompute="full", loss="liger", lora=lora_rank).validate(model).strategy()
        assert strategy.output_weight_grad == (lora_rank == 0)
        work[lora_rank] = at(activations.total_bytes(step_terms(strategy, saved).loss_work),
                             **{**model.values(), "s": 1024, "b": 1, "t": 1})
    assert work[0] - work[16] == 6 * v * h


def test_solve_with_lora_and_liger_finds_the_sequence_the_fused_kernel_finds(capsys):
    # issue 39: the LoRA/QLoRA 70B run on a 48 GB card found nothing under liger (51.24 GB at s = 1:
    # a V·h gradient of the frozen output layer); without it the binding instant is the last layer's
    # backward, the same as under the fused kernel: s = 2450 (2409 before the frozen base's inputs went)
    argv = ["solve", "llama-3.1-70b", "--max", "seq", "--lora", "16", "--base-dtype", "nf4",
            "--gpu-memory", "48GB", "--recompute", "full", "--json"]
    assert main([*argv, "--loss", "liger"]) == 0
    liger = json.loads(capsys.readouterr().out)
    assert main([*argv, "--loss", "fused"]) == 0
    fused = json.loads(capsys.readouterr().out)
    assert liger["seq"] == fused["seq"] == 2450
    assert liger["check"]["fits"] and liger["check"]["next_fits"] is False
