"""Korthikanti et al. 2022: the coefficients and equations fall out of the inventory."""
from sympy import Rational, expand

from symbolic.models.architectures import gpt
from symbolic.claims.claims import equal
from symbolic.core.dims import L, a, b, h, p, s, t, v
from symbolic.ledgers import activations
from symbolic.layout.strategies import (Strategy, activation_dtype, full_recompute, selective_recompute,
                                 sequence_parallel, tensor_parallel)
from symbolic.core.tensors import Axis, Group

TP = Strategy(tensor_parallel=True)
TPSP = Strategy(tensor_parallel=True, sequence_parallel=True)


def coefficients(expr):
    return dict(expand(expr).as_coefficients_dict())


def test_inventory_lists_every_saved_tensor_of_section_4_1():
    assert gpt.saved_tensors().names() == [
        "attention/layernorm_input", "attention/qkv_input", "attention/query", "attention/key",
        "attention/softmax_output", "attention/softmax_dropout_mask", "attention/softmax_dropout_output",
        "attention/value", "attention/projection_input", "attention/dropout_mask",
        "mlp/layernorm_input", "mlp/fc1_input", "mlp/gelu_input", "mlp/fc2_input", "mlp/dropout_mask"]


def test_bytes_come_from_shape_and_dtype():
    inv = gpt.saved_tensors()
    assert inv["attention/softmax_output"].bytes == 2 * b * a * s**2
    assert inv["attention/softmax_dropout_mask"].bytes == b * a * s**2
    assert inv["mlp/gelu_input"].bytes == 2 * s * b * 4 * h
    assert inv["attention/query"].elements == s * b * h  # (s, b, a, h/a)


def test_coefficients_10_24_5_emerge_under_tensor_parallelism():
    assert coefficients(activations.per_layer(TP)) == {s * b * h: 10, s * b * h / t: 24, a * s**2 * b / t: 5}


def test_coefficient_34_and_5_without_parallelism():
    assert coefficients(activations.per_layer()) == {s * b * h: 34, a * s**2 * b: 5}


def test_breakdowns_10_is_4_2_4_and_24_is_8_16_and_5_is_2_1_2():
    inv = activations.layer_inventory(TP)
    by = lambda names: expand(activations.total_bytes(inv.select(names)) / (s * b * h))  # noqa: E731
    assert by(["attention/layernorm_input", "mlp/layernorm_input"]) == 4
    assert by(["attention/dropout_mask", "mlp/dropout_mask"]) == 2
    assert by(["attention/qkv_input", "mlp/fc1_input"]) == 4
    assert by(["attention/query", "attention/key", "attention/value", "attention/projection_input"]) == 8 / t
    assert by(["mlp/gelu_input", "mlp/fc2_input"]) == 16 / t
    per_map = lambda name: expand(inv[name].bytes / (a * s**2 * b / t))  # noqa: E731
    assert [per_map(n) for n in ("attention/softmax_output", "attention/softmax_dropout_mask",
                                 "attention/softmax_dropout_output")] == [2, 1, 2]


def test_the_10_are_exactly_the_sequence_axis_terms():
    seq = [x for x in activations.layer_inventory(TP) if x.split is Axis.SEQUENCE]
    assert expand(activations.total_bytes(type(activations.layer_inventory(TP))(tuple(seq)))) == 10 * s * b * h


def test_eq1_eq2_eq4_eq6_and_full_recompute_equal_the_paper_forms():
    assert equal(activations.per_layer(), s * b * h * (34 + 5 * a * s / h))
    assert equal(activations.per_layer(TP), s * b * h * (10 + 24 / t + 5 * a * s / (h * t)))
    assert equal(activations.per_layer(TPSP), s * b * h / t * (34 + 5 * a * s / h))
    assert equal(activations.per_layer(Strategy(True, True, "selective")), 34 * s * b * h / t)
    assert equal(activations.per_layer(Strategy(True, False, "selective")), s * b * h * (10 + 24 / t))
    assert activations.per_layer(Strategy(True, False, "full")) == 2 * s * b * h  # Table 2: whole on every rank
    assert activations.per_layer(Strategy(True, True, "full")) == 2 * s * b * h / t  # SP: as it arrives, s/t


def test_eq5_first_stage_holds_L_layers_worth():
    stage = activations.stage(Strategy(True, True, pipeline=True))
    assert equal(stage, s * b * h * L / t * (34 + 5 * a * s / h))
    in_flight, layers = Strategy(True, True, pipeline=True).layers_held()
    assert (in_flight, layers) == (p, L / p)


def test_interleaved_schedule_multiplies_by_1_plus_p_minus_1_over_p_v():
    base = activations.stage(Strategy(True, True, pipeline=True))
    inter = activations.stage(Strategy(True, True, pipeline=True, interleaved=True))
    assert equal(inter / base, 1 + (p - 1) / (p * v))
    assert inter.subs({p: 8, v: 3}) / base.subs({p: 8, v: 3}) == Rational(31, 24)  # 1.2917


def test_strategies_compose_in_any_order():
    inv = gpt.saved_tensors()
    one = selective_recompute(sequence_parallel(tensor_parallel(inv)))
    two = tensor_parallel(selective_recompute(sequence_parallel(inv)))
    assert equal(activations.total_bytes(one), activations.total_bytes(two))


def test_full_recompute_keeps_only_the_layer_input_whole():
    kept = full_recompute(tensor_parallel(gpt.saved_tensors()))
    assert kept.names() == ["attention/layernorm_input"]
    assert kept["attention/layernorm_input"].group is Group.LAYER_INPUT
    assert kept["attention/layernorm_input"].bytes == 2 * s * b * h


def test_full_recompute_under_sp_keeps_the_sequence_shard_the_layer_receives():
    """The residual stream between layers is sequence-sharded under SP: the kept input is 2sbh/t (measured on
    one rank of PyTorch's SequenceParallel with a checkpointed layer, tests/test_per_rank.py)."""
    kept = full_recompute(sequence_parallel(tensor_parallel(gpt.saved_tensors())))
    assert kept.names() == ["attention/layernorm_input"]
    assert kept["attention/layernorm_input"].bytes == 2 * s * b * h / t


def test_fp32_activations_double_the_floats_not_the_masks():
    fp32 = activations.total_bytes(activation_dtype(gpt.saved_tensors(), "fp32"))
    assert coefficients(fp32) == {s * b * h: 66, a * s**2 * b: 9}  # 16 float sbh x4 + 2 masks; 4+1+4
