"""``solve``'s output: the largest value that fits, its check and the inequality it solved, as text
and as JSON, from a :class:`symbolic.search.solve` result — what ``symbolic solve`` prints and
``symbolic.solve()`` returns (below the commands: both render with it)."""
from __future__ import annotations


def _layout_words(layout) -> str:
    return (f"t={layout.tp} p={layout.pp} d={layout.dp} v={layout.interleave}"
            + (" SP" if layout.sp else "") + (f" c={layout.cp}" if layout.cp > 1 else "")
            + (f" e={layout.ep} e_t={layout.etp or layout.tp}" if layout.ep > 1 or layout.etp else "")
            + f", {'no' if layout.recompute == 'none' else layout.recompute} recompute, ZeRO-{layout.zero}, "
            f"{layout.optimizer}, {layout.dtype} activations"
            + (f", global batch {layout.global_batch}" if layout.global_batch else ""))


def render_text(limit, width: int = 160, brief: bool = False, gpu=None, preset=None) -> str:
    """The answer first (the largest value, checked by the bill), then the
    inequality it solved, wrapped to ``width`` columns."""
    import json

    from ..render.summary import solve_summary, wrap

    head = solve_summary(json.loads(render_json(limit, gpu, preset)), width)
    if brief:
        return "\n".join(head)
    body = _details(limit).split("\n")
    return "\n".join(head + [""] + [piece for line in body for piece in wrap(line, width, subsequent="      ")])


def _details(limit) -> str:
    from sympy import sstr

    from ..core.numeric import fmt
    from .plan import margin_words

    sym = limit.symbol.name
    lay = limit.layout
    fixed = f"s = {lay.seq or limit.model.seq}" if limit.target == "micro_batch" else f"b = {lay.micro_batch}"
    out = [f"{limit.model.name}: {_layout_words(lay)}, {fixed}"
           + (f", Psi = {limit.params_hand:,} (hand-filled)" if limit.params_hand else ", Psi = config count"),
           f"memory per GPU = the step's peak on the busiest GPU, binding at {limit.instant or 'its peak'}: "
           f"{sstr(limit.symbolic)}",
           f"solved: {limit.inequality()}   (bytes; {fmt(limit.usable, 'GB')} = {fmt(limit.gpu_memory, 'GB')}"
           + (f" − {margin_words(limit.margin)})" if limit.margin else ", no margin)")]
    if limit.root is not None:
        out.append(f"  {sym} ≤ {sstr(limit.root)} ≈ {float(limit.root):.4f}; largest integer {limit.bound}")
    if limit.splits:
        out.append(f"{limit.model.layers} layers do not divide over pp {lay.pp}: Megatron-Core's uneven first/last "
                   "stages solved, each split whose fullest stage holds ⌈L/p⌉ layers (first/last 0: as the middle "
                   "ones): " + "; ".join(f"{first}/{last}: {sym} = {answer if answer is not None else 'none fits'}"
                                         for first, last, answer in limit.splits)
                   + f" — the answer's split is {lay.first_stage_layers}/{lay.last_stage_layers}")
    elif limit.bracket is not None and limit.bound:
        out.append(f"  rounded terms relaxed both ways (ceiling(u) in [u, u + 1)): {sym} between {limit.bracket[0]} and "
                   f"{limit.bracket[1]}; bisection on the exact expression: largest integer {limit.bound}")
    if limit.answer is None:
        out.append(f"NOTHING FITS: the smallest valid {sym} = {getattr(lay, limit.target)} needs "
                   f"{fmt(limit.total_at_answer, 'GB')}, over by {fmt(limit.total_at_answer - limit.usable, 'GB')}")
        lever = limit.lever
        if lever is not None:
            out.append(f"  with {' + '.join(lever.levers)}: {sym} = {lever.answer} needs "
                       f"{fmt(lever.total_bytes, 'GB')}; cost: {lever.cost}")
        return "\n".join(out)
    step = "" if limit.answer == limit.bound else f" (the largest valid value: {_why(limit)})"
    out.append(f"largest {limit.target.replace('_', '-')}: {sym} = {limit.answer}{step}")
    out.append(f"check (bill): {sym} = {limit.answer}: {fmt(limit.total_at_answer, 'GB')}, "
               + ("fits" if limit.answer_fits() else "DOES NOT FIT")
               + f", headroom {fmt(limit.usable - limit.total_at_answer, 'GB')}")
    if limit.next_value is None:
        out.append(f"  no larger valid {sym} exists for this layout")
    else:
        out.append(f"  {sym} = {limit.next_value}: {fmt(limit.total_at_next, 'GB')}, "
                   + ("FITS (check failed)" if limit.next_fits() else "does not fit")
                   + f", over by {fmt(limit.total_at_next - limit.usable, 'GB')}")
    return "\n".join(out)


def _why(limit) -> str:
    lay = limit.layout
    table = limit.model.position_table
    if limit.target == "seq" and table and limit.answer is not None and limit.answer + _step_of(lay) > table:
        return f"the learned position table has {table} rows, n_positions"
    if limit.target == "seq" and lay.cp > 1:
        return (f"s must be a multiple of t·c = {lay.tp}·{lay.cp} under sequence and context parallelism" if lay.sp
                else f"s must be a multiple of c = {lay.cp} under context parallelism")
    if limit.target == "seq" and lay.sp:
        return f"s must be a multiple of t = {lay.tp} under sequence parallelism"
    if limit.target == "micro_batch" and lay.global_batch:
        return f"b·d must divide the global batch {lay.global_batch}"
    return "the layout's divisibility rules"


def _step_of(layout) -> int:
    """Valid sequence lengths are multiples of this (c; t·c under SP)."""
    return layout.cp * (layout.tp if layout.sp else 1)


def render_json(limit, gpu=None, preset=None) -> str:
    """``solve --json``; ``preset``: what ``--framework`` filled (a ``layout.frameworks.PresetChoice``)."""
    import json

    from sympy import sstr

    from ..models.config import seq_origin

    lay = limit.layout

    def num(value):
        from sympy import Rational

        if value is None:
            return None
        value = Rational(value)
        return int(value) if value.is_Integer else f"{value.p}/{value.q}"

    data = {
        "model": limit.model.name, "target": limit.target, limit.target: limit.answer,
        "inequality": limit.inequality(),
        "memory_per_gpu": sstr(limit.symbolic),
        "binding_instant": limit.instant,
        "root": None if limit.root is None else sstr(limit.root),
        "root_value": None if limit.root is None else float(limit.root),
        "largest_integer": limit.bound,
        # nothing fits: the lever that makes the target reachable (the bill's fix list, first that solves)
        "lever": None if limit.lever is None else {
            "levers": list(limit.lever.levers), "flags": " ".join(limit.lever.flags), limit.target: limit.lever.answer,
            "total_bytes": num(limit.lever.total_bytes), "cost": limit.lever.cost},
        "bracket": None if limit.bracket is None else list(limit.bracket),
        "gpu_memory_bytes": limit.gpu_memory, "margin_bytes": limit.margin, "usable_bytes": limit.usable,
        "params_hand": limit.params_hand,
        "layout": {"micro_batch": lay.micro_batch, "seq": lay.seq or limit.model.seq, "tp": lay.tp, "pp": lay.pp,
                   "dp": lay.dp, "sp": lay.sp, "recompute": lay.recompute, "zero": lay.zero,
                   "optimizer": lay.optimizer, "interleave": lay.interleave, "dtype": lay.dtype,
                   "global_batch": lay.global_batch, "cp": lay.cp, "loss": lay.loss},
        "check": {"value": getattr(lay, limit.target) or None, "total_bytes": num(limit.total_at_answer),
                  "fits": limit.answer_fits(), "next_value": limit.next_value,
                  "next_total_bytes": num(limit.total_at_next), "next_fits": limit.next_fits()},
    }
    data["layout"].update(lay.memory_levers())  # the memory levers, when set (the layout line says them)
    if lay.schedule and lay.pp > 1:  # a schedule chosen (layout.schedules): the layout line names it
        data["layout"]["schedule"] = lay.schedule
    if lay.uneven_stages and not lay.pipeline_layout:  # the split: its stages' layers and its flags
        counts = lay.stage_layer_counts(limit.model)
        data["layout"].update(first_stage_layers=lay.first_stage_layers, last_stage_layers=lay.last_stage_layers,
                              stage_layers=[counts[0], counts[-1]] if lay.pp == 2 else [counts[0], counts[1],
                                                                                          counts[-1]])
    if limit.splits:  # the layers did not divide over p: Megatron's uneven splits, each solved
        data["splits"] = [{"first_stage_layers": first, "last_stage_layers": last, limit.target: answer}
                          for first, last, answer in limit.splits]
    if limit.target == "seq" and limit.model.max_positions:  # the config's position table (RoPE: its trained range)
        data["max_positions"] = limit.model.max_positions
    if limit.target != "seq" and seq_origin(limit.model, lay.seq):  # s not given: where it comes from
        data["layout"]["seq_from"] = seq_origin(limit.model, lay.seq)
    if gpu is not None:  # which option set the memory (--gpu, --gpu-memory)
        data["gpu"] = gpu.as_dict()
    if preset is not None and preset.fields:  # what --framework filled: the layout line names it
        data["framework_preset"] = preset.as_dict()
    return json.dumps(data, indent=2, allow_nan=False)  # never Infinity/NaN: not JSON
