"""``symbolic trace``: fit what a real module saves and counts, and set it against the inventory.

Two sources of a module (optional extra ``torch``):

- ``--hf config.json``: one decoder layer of a HuggingFace config, the
  architecture picked from ``model_type`` (llama, mixtral, qwen2_moe, gpt2), built at
  the config's widths (``--set key=value`` overrides one, e.g. to shrink a
  large model), run at several (s, b) and fitted as a polynomial in s and b;
  the declared inventory at the same widths is compared term by term. Any
  other family the reader knows is measured as its HF model of L + 1 layers
  less L, at each (s, b), against the bill's declared layer.
- ``--factory package.module:function``: your own ``function(**dims)``
  returning ``(module, args)`` or ``(module, args, kwargs)``; ``--dims s=2,3,4``
  gives the values each dimension takes; the fit is a polynomial of degree
  ``--degree`` in them.
"""
from __future__ import annotations

import argparse

from ..models.config import ConfigError
from ..core.inputs import clean
from ._options import add_dtype_option

HELP = "trace a real module (HF config or module:factory): saved tensors and FLOPs, fitted and compared"


#: The dtypes a trace runs in: the shared --dtype vocabulary -> torch's names.
_TORCH_DTYPES = {"bf16": "bfloat16", "fp32": "float32"}
_MAX_TRACE_VALUE = 4096  # a traced dimension value: the module is built and run on the CPU at it


def _ints(text: str) -> list[int]:
    words = [x.strip() for x in text.split(",") if x.strip()]
    if len(words) > 64 or not all(word.isdigit() and len(word) <= 6 for word in words):
        raise argparse.ArgumentTypeError(f"{clean(text)!r}: give up to 64 comma-separated positive integers, "
                                         "e.g. 3,4,5") from None
    values = sorted({int(x) for x in words})
    if values and values[-1] > _MAX_TRACE_VALUE:
        raise argparse.ArgumentTypeError(f"{clean(text)!r}: values up to {_MAX_TRACE_VALUE} (each is run on the CPU)")
    if not values or values[0] <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: give comma-separated positive integers, e.g. 3,4,5")
    return values


def add_arguments(parser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--hf", metavar="CONFIG",
                        help="a HuggingFace config.json of any family the reader knows")
    source.add_argument("--factory", metavar="MODULE:FUNCTION",
                        help="your function(**dims) -> (module, args[, kwargs])")
    parser.add_argument("--attention", choices=("sdpa", "eager"), default="sdpa",
                        help="HF attention implementation (sdpa: the fused kernel; eager: explicit)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override an integer field of the HF config (e.g. hidden_size=256)")
    # lists of values, so not --seq/--micro-batch (one number in every other command)
    parser.add_argument("--seqs", dest="seqs", type=_ints, default=[3, 4, 5, 6, 7, 8], metavar="S1,S2,...",
                        help="sequence lengths to run (--hf)")
    parser.add_argument("--batches", dest="batches", type=_ints, default=[2, 3, 4], metavar="B1,B2,...",
                        help="micro-batch sizes to run (--hf)")
    parser.add_argument("--dims", action="append", default=[], metavar="NAME=V1,V2,...",
                        help="values of one dimension (--factory), e.g. s=2,3,4")
    parser.add_argument("--degree", type=int, choices=(1, 2, 3, 4), default=3,
                        help="total degree of the fitted monomials (default 3)")
    add_dtype_option(parser, help="dtype to run in (--hf; bf16 or fp32, the CPU kernels traced)")
    parser.add_argument("--records", action="store_true", help="list every saved storage with its fitted bytes")


def _overrides(pairs: list[str]) -> dict[str, int]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip() or not value.strip().isdigit() or len(value.strip()) > 9 or int(value) <= 0:
            raise ConfigError(f"--set {clean(pair)!r}: give KEY=VALUE with a positive integer, e.g. hidden_size=256")
        out[key.strip()] = int(value)
    return out


def _dims(pairs: list[str]) -> dict:
    from ..core.dims import SYMBOLS

    out = {}
    for pair in pairs:
        name, sep, values = pair.partition("=")
        if not sep or name.strip() not in SYMBOLS:
            raise ConfigError(f"--dims {clean(pair)!r}: give NAME=V1,V2 with NAME one of {', '.join(SYMBOLS)}")
        try:
            out[SYMBOLS[name.strip()]] = _ints(values)
        except argparse.ArgumentTypeError as error:
            raise ConfigError(f"--dims {name}: {error}") from None
    if not out:
        raise ConfigError("--factory needs --dims, e.g. --dims s=2,3,4 --dims b=1,2")
    return out


def _load_factory(spec: str):
    import importlib

    module_name, sep, function = spec.partition(":")
    if not sep or not module_name or not function.isidentifier():
        raise ConfigError(f"--factory {clean(spec)!r}: give MODULE:FUNCTION, e.g. mymodels:make_layer")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ConfigError(f"--factory: cannot import {module_name!r} ({error}); is it on PYTHONPATH?") from None
    if not callable(getattr(module, function, None)):
        raise ConfigError(f"--factory: {module_name} has no function {function!r}")
    return getattr(module, function)


def _print_fit(fitted, records: bool) -> None:
    from sympy import sstr

    if records:
        print("saved storages (first run's shape), fitted bytes:")
        for key, expr in fitted.saved.items():
            r = fitted.records[key]
            print(f"  {key:<58} {r.dtype:<9} {str(r.shape):<18} {sstr(expr)} B")
    for u in fitted.unfitted:
        print(f"  does not fit the basis: {u.key}: observed {', '.join(map(str, u.observed))}")
    print(f"saved bytes, fitted:     {sstr(fitted.saved_total) if fitted.saved_total is not None else 'no fit'} B")
    print(f"forward FLOPs, fitted:   {sstr(fitted.forward_flops) if fitted.forward_flops is not None else 'no fit'}")
    print(f"backward FLOPs, fitted:  {sstr(fitted.backward_flops) if fitted.backward_flops is not None else 'no fit'}")


def _difference(label: str, fitted, declared) -> bool:
    from sympy import sstr

    from ..trace import compare

    if fitted is None:
        print(f"{label}: the traced values do not fit the basis (see above)")
        return False
    diff = compare(fitted, declared)
    print(f"{label}, declared: {sstr(declared)}")
    if not diff:
        print(f"{label}: fitted == declared, term by term")
        return True
    for mono, (got, want) in sorted(diff.items(), key=lambda kv: sstr(kv[0])):
        print(f"  {sstr(mono)}: traced {got}, declared {want} (difference {got - want})")
    return False


def _run(args) -> int:
    from importlib.util import find_spec
    from pathlib import Path

    from .. import trace as tr
    from ..render.progress import progress

    if find_spec("transformers") is not None:  # an --hf trace needs it; symbolic.trace says so if missing
        import transformers
        # its config warnings (token ids of a shrunk vocabulary...) are not ours to print
        transformers.logging.set_verbosity_error()
    if args.dtype not in _TORCH_DTYPES:
        raise ConfigError(f"--dtype {args.dtype}: a trace runs in bf16 or fp32 (the CPU kernels traced)")
    args.dtype = _TORCH_DTYPES[args.dtype]
    if args.factory:
        factory = _load_factory(args.factory)
        ranges = _dims(args.dims)
        basis = tr.monomials(list(ranges), args.degree)
        points = tr.design_points(basis, ranges)
        try:
            with progress(len(points), f"tracing {clean(args.factory)}") as step:
                fitted = tr.fit(factory, points, basis, custom_flops=tr.flop_fixes(), progress=step)
        except (TypeError, ValueError, AttributeError, RuntimeError) as error:
            raise ConfigError(f"--factory {clean(args.factory)}: calling it at the --dims values failed "
                              f"({type(error).__name__}: {clean(error)}); it must return (module, args[, kwargs])") \
                from None
        print(f"{clean(args.factory)}: {len(points)} runs over {', '.join(str(k) for k in ranges)}")
        _print_fit(fitted, args.records)
        return 0 if not fitted.unfitted else 1

    from ..core.inputs import read_json_file

    path = Path(args.hf)
    if path.is_dir():
        path = path / "config.json"
    config = read_json_file(path)
    if not isinstance(config, dict):
        raise ConfigError(f"--hf {clean(args.hf)!r}: a config.json holds one JSON object, not {type(config).__name__}")
    config = dict(config, **_overrides(args.set))
    # a Qwen2-MoE file without experts is a dense model (every layer HF builds is the dense MLP): its layer is
    # the bill's composed dense layer, measured by difference, not the MoE inventory the fitted path declares
    if config.get("model_type") not in tr.HF_MODELS or config.get("num_experts") == 0:
        return _by_difference(config, args)
    cfg = tr.hf_config(config, args.attention, **_overrides(args.set))
    from sympy import Add

    from ..core.dims import SYMBOLS, b, s
    from ..ledgers import activations

    values = {SYMBOLS[name]: value for name, value in tr.hf_values(cfg).items()}
    saved, mms, extra = tr.hf_declared(cfg, dtype=args.dtype)
    layer = mms.select("layer")
    declared = {
        "saved bytes": activations.total_bytes(saved).subs(values),
        "forward FLOPs": Add(*(mm.forward_flops for mm in layer)).subs(values),
        "backward FLOPs": (Add(*(mm.backward_flops for mm in layer)) + extra).subs(values),
    }
    # every tensor of a layer is linear in the micro-batch; s enters up to --degree (s² for scores)
    basis = [s**i * b**j for j in (0, 1) for i in range(args.degree + 1)]
    points = tr.design_points(basis, {s: args.seqs, b: args.batches})
    with progress(len(points), f"tracing one {cfg.model_type} layer") as step:
        fitted = tr.fit(tr.hf_layer_factory(cfg, dtype=args.dtype), points, basis, custom_flops=tr.flop_fixes(),
                        progress=step)
    widths = ", ".join(f"{k}={v}" for k, v in tr.hf_values(cfg).items())
    print(f"{cfg.model_type} decoder layer ({args.attention} attention, {args.dtype}, CPU), {widths}; "
          f"{len(points)} runs over s in {args.seqs}, b in {args.batches}")
    _print_fit(fitted, args.records)
    ok = [_difference(label, got, declared[label]) for label, got in
          (("saved bytes", fitted.saved_total), ("forward FLOPs", fitted.forward_flops),
           ("backward FLOPs", fitted.backward_flops))]
    return 0 if all(ok) else 1


def _by_difference(config: dict, args) -> int:
    """Any family the reader knows: one decoder layer measured as the HF model of L + 1 layers less
    the model of L (``symbolic.trace.hf_layer_by_difference``) at each (s, b), set against the
    bill's declared layer at the config's widths. b = 1 is skipped (the declared layer's
    condition for eager attention is b ≥ 2)."""
    from sympy import Add

    from .. import trace as tr
    from ..core.dims import SYMBOLS
    from ..ledgers import activations
    from ..models import hf

    if args.dtype != "bfloat16":
        raise ConfigError(f"--dtype: a {clean(config['model_type'])} layer is measured by difference in bf16 only; "
                          "drop --dtype")
    hf.from_hf_dict(config, "traced", where=clean(args.hf))  # a config the bill refuses is refused here too

    def kinds(n: int) -> dict:  # the model of n layers, resized as it is built (symbolic.trace.resized_config)
        return dict(hf.from_hf_dict(tr.resized_config(config, n), "traced").dims)

    # the layer measured is the second of two: dense if the two-layer model has one more dense layer, NoPE if
    # it has one more NoPE layer (Llama 4), KV-shared or sparse if it has one more of those (Gemma 3n), a Mamba
    # layer if it has one more Mamba layer (Granite-4.0-H)
    one, two = kinds(1), kinds(2)

    def declared_at(s: int):  # at s ≥ w a windowed layer's SDPA path materialises its mask (models.windows)
        saved, layer, extra, values = tr.hf_family_declared(
            config, args.attention, dense=two.get("L_d", 0) > one.get("L_d", 0),
            nope=two.get("L_n", 0) > one.get("L_n", 0), seq=s, windowed=two.get("L_w", 0) > one.get("L_w", 0),
            kinds=tuple(letter for letter in ("L_kv", "L_sp") if two.get(letter, 0) > one.get(letter, 0)),  # Gemma 3n
            mamba=two.get("L_s", 0) > one.get("L_s", 0))
        return (activations.total_bytes(saved), Add(*(mm.forward_flops for mm in layer)),
                Add(*(mm.backward_flops for mm in layer)) + extra), values
    batches = [b for b in args.batches if b > 1] or [2]
    print(f"{config['model_type']} decoder layer ({args.attention} attention, bfloat16, CPU), measured as the "
          f"model of L + 1 layers less L; s in {args.seqs}, b in {batches}")
    ok = True
    for s in args.seqs:
        exprs, values = declared_at(s)
        for b in batches:
            at = {SYMBOLS[name]: value for name, value in dict(values, s=s, b=b).items()}
            declared = tuple(int(expr.subs(at)) for expr in exprs)
            traced = tr.hf_layer_by_difference(config, args.attention, s, b)
            same = traced == declared
            ok &= same
            labels = ("saved bytes", "forward FLOPs", "backward FLOPs")
            print(f"  s={s} b={b}: " + "; ".join(
                f"{label} {got:,}" + ("" if got == want else f" (declared {want:,})")
                for label, got, want in zip(labels, traced, declared)) + ("  == declared" if same else ""))
    print("traced == declared at every point" if ok else "traced != declared (see above)")
    return 0 if ok else 1


def run(args) -> int:
    """The command, its plain lines wrapped to the terminal's width (JSON as is)."""
    from ..render.terminal import run_wrapped

    return run_wrapped(_run, args)
