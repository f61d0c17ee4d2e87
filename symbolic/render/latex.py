"""The formula sheet: every ledger's derivation as LaTeX, and the errata.

For each ledger the sheet shows the inventory the engine sums (saved tensors
with shapes, bytes and split axes; parameters; recipe byte blocks; matmuls),
the simplified results it derives from them, and then every claim of the
sources (``derivations/*.toml``) on that ledger, once: under the engine's
result it states, with its source (and bibliography key), its conditions and
its own form. The errata close the sheet on pages of their own; the sources
(:mod:`symbolic.claims.sources`) follow the notation. No test log: a claim's
status shows as where it is printed (a reproduced form or number in its
ledger, an erratum on the errata pages).

Nothing here holds a formula: the results come from
:mod:`symbolic.claims.quantities` and the inventories, the paper forms from the
claims, and both go through ``sympy.latex`` with the papers' letters
(:data:`symbolic.core.dims.LATEX_NAMES`). The text is plain ASCII LaTeX, so it
compiles with pdflatex from Debian's texlive-latex-base and
texlive-latex-recommended; the sources' Chinese quotations are left out (the
claim ids and sections point to them).
"""
from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from sympy import Add, Expr, Integer, Mul, expand, factor_terms, latex

from ..claims.claims import Claim, Result, check, engine_expression
from ..claims.quantities import evaluate
from ..core.dims import DIMENSIONS, LATEX_NAMES, SYMBOLS
from ..core.expressions import parse_formula
from ..core.numeric import UNITS
from ..core.tensors import DTYPE_BYTES, Axis, Inventory
from ..layout.strategies import Strategy
from ..ledgers import activations, flops, params, states
from ..models.architectures import gpt

#: The ledgers in the order the sheet tells them, each with its title and the
#: prefixes of the quantities (``symbolic.claims.quantities``) its claims ask for.
LEDGERS = (
    ("activations", "Activations", ("activations.",)),
    ("params", "Parameters", ("params",)),
    ("model_states", "Model states", ("states.",)),
    ("flops", "FLOPs", ("flops.",)),
    ("units", "Units and other quantities", ("unit",)),  # also every claim no ledger above takes
)

#: The activation strategies the sheet evaluates per layer, as Strategy options.
STRATEGIES = (
    ("no parallelism", {}),
    ("tensor parallel (TP)", {"tensor_parallel": True}),
    ("TP + sequence parallel (SP)", {"tensor_parallel": True, "sequence_parallel": True}),
    ("TP + selective recompute", {"tensor_parallel": True, "recompute": "selective"}),
    ("TP + SP + selective recompute", {"tensor_parallel": True, "sequence_parallel": True,
                                       "recompute": "selective"}),
    ("TP + full recompute", {"tensor_parallel": True, "recompute": "full"}),
    ("TP + SP + full recompute", {"tensor_parallel": True, "sequence_parallel": True, "recompute": "full"}),
)

# --- text ------------------------------------------------------------------

_SPECIALS = {"\\": r"\textbackslash{}", "{": r"\{", "}": r"\}", "$": r"\$", "&": r"\&", "#": r"\#",
             "^": r"\textasciicircum{}", "_": r"\_", "%": r"\%", "~": r"\textasciitilde{}"}

#: Non-ASCII characters the sources use, as pdflatex-safe LaTeX.
_UNICODE = {
    "×": r"$\times$", "·": r"$\cdot$", "≈": r"$\approx$", "≤": r"$\le$", "≥": r"$\ge$", "≠": r"$\ne$",
    "≪": r"$\ll$", "≫": r"$\gg$", "→": r"$\to$", "←": r"$\leftarrow$", "−": "-", "–": "--", "—": "---",
    "‘": "`", "’": "'", "“": "``", "”": "''", "…": r"\dots{}", "²": r"$^2$", "³": r"$^3$",
    "ᵀ": r"$^{\mathsf{T}}$", "Ψ": r"$\Psi$", "ε": r"$\varepsilon$", "Σ": r"$\Sigma$", "µ": r"$\mu$",
    "μ": r"$\mu$", "±": r"$\pm$", "√": r"$\surd$", "∞": r"$\infty$", "°": r"$^\circ$", "⌈": r"$\lceil$",
    "⌉": r"$\rceil$", "⌊": r"$\lfloor$", "⌋": r"$\rfloor$", "§": r"\S{}", "÷": r"$\div$", "∝": r"$\propto$",
    "\u00a0": "~",
}

#: A run of characters pdflatex cannot set without CJK fonts (the sources' Chinese).
_CJK = re.compile(r"[\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef\u3000-\u303f]+")


def tex(text: str) -> str:
    """``text`` as LaTeX: specials escaped, known symbols mapped, Chinese runs
    replaced by ``[zh]`` (the source's words are in the claim it cites), any
    other non-ASCII character by ``?``."""
    text = _CJK.sub(" [zh] ", str(text))
    out = []
    for char in text:
        if char in _SPECIALS:
            out.append(_SPECIALS[char])
        elif char in _UNICODE:
            out.append(_UNICODE[char])
        elif ord(char) < 128:
            out.append(char)
        else:
            out.append("?")
    return re.sub(r" {2,}", " ", "".join(out)).strip()


def math(expr: Expr) -> str:
    """``expr`` in the papers' letters (Psi as \\Psi), as inline math."""
    return "$" + latex(expr, symbol_names=LATEX_NAMES) + "$"


def dmath(expr: Expr) -> str:
    """``expr`` as display-style math inside a table cell (fractions full size)."""
    return r"$\displaystyle " + latex(expr, symbol_names=LATEX_NAMES) + "$"


def display(expr: Expr) -> str:
    return r"\[ " + latex(expr, symbol_names=LATEX_NAMES) + r" \]"


def simplified(expr: Expr) -> Expr:
    """The engine's result as the papers write it: expanded, then the monomial
    of its leading term (highest power of h, then highest degree) pulled out,
    e.g. ``sbh(34 + 5as/h)``, ``Lh^2(12 + 13/h + ...)``. Deterministic and
    cheap (no ``simplify``); the value is unchanged."""
    expanded = expand(expr)
    terms = Add.make_args(expanded)
    if len(terms) < 2:
        return factor_terms(expanded)

    def rank(term: Expr):
        powers = term.as_powers_dict()
        degree = sum(exponent for base, exponent in powers.items() if base.is_Symbol)
        return (powers.get(SYMBOLS["h"], 0), degree, str(term))

    _, monomial = max(terms, key=rank).as_coeff_Mul()
    if monomial == 1:
        return expanded
    return Mul(monomial, expand(expanded / monomial), evaluate=False)


# --- claims, grouped by ledger and by the engine question they ask ---------

def ledger_of(claim: Claim) -> str:
    """The ledger a claim belongs to, by the (first) quantity it asks for."""
    spec = claim.spec
    quantity = spec.get("quantity") or next(
        (b.get("quantity") for b in spec.get("let", {}).values() if b.get("quantity")), "")
    for name, _, prefixes in LEDGERS:
        if any(quantity.startswith(prefix) for prefix in prefixes):
            return name
    return "units"


def _question(claim: Claim) -> tuple:
    """Claims asking the engine the same question share one engine result."""
    spec = claim.spec
    return (repr(spec.get("quantity")), repr(sorted((spec.get("options") or {}).items())),
            repr(sorted((spec.get("at") or {}).items())), spec.get("expr"), repr(spec.get("let")), claim.unit)


@dataclass
class FormGroup:
    """Form claims that ask the same question, and the engine's answer."""

    engine: Expr
    results: list[Result]


def form_groups(results: list[Result]) -> list[FormGroup]:
    groups: dict[tuple, FormGroup] = {}
    for result in results:
        claim = result.claim
        # the claim as the reading it is reproduced under reads it, where its source leaves an input open
        reading = next((r for r in claim.readings if r.name == result.reading), None)
        read = claim if reading is None else reading.of(claim)
        key = _question(read)
        if key not in groups:
            try:
                engine = engine_expression(read) / _unit(read.unit)
            except (ValueError, TypeError, KeyError):
                engine = None
            groups[key] = FormGroup(engine, [])
        groups[key].results.append(result)
    return list(groups.values())


def _unit(unit: str) -> Expr:
    factor = UNITS[unit]
    return Integer(factor) if isinstance(factor, int) else factor


def paper_form(text: str) -> str:
    """A claim's form as LaTeX, read with the guarded formula parser; shown
    verbatim when it uses names other than the dimensions."""
    try:
        return latex(parse_formula(text, SYMBOLS), symbol_names=LATEX_NAMES)
    except ValueError:
        return r"\text{" + tex(text) + "}"


def _cite(claim: Claim) -> str:
    """Where a claim is from, with its bibliography keys (the sheet's Sources, docs/sources.md)."""
    from ..claims.sources import cite

    where = f"{claim.document} {claim.section}".strip()
    return tex(cite(where) if claim.document != "papers" else cite(claim.section))


def breakable(text: str) -> str:
    """``text`` as LaTeX that may break after ``/``, ``-``, ``_``, ``.``, ``,`` and ``=``
    (claim ids and tensor names are long words in a typewriter font)."""
    escaped = tex(text)
    return re.sub(r"(/|-|\\_|\.(?=\S)|,|=)", lambda m: m.group(1) + r"\allowbreak{}", escaped)


def _id(claim: Claim) -> str:
    return r"\texttt{" + breakable(claim.id) + "}"


def _reading(result: Result) -> str:
    """Where the source leaves an input open: the reading that reproduces the claim (issue 27)."""
    return (r" \emph{(under: " + tex(result.reading) + ")}") if result.reading else ""


def claims_block(results: list[Result]) -> list[str]:
    """The ledger's claims, each once: the engine's derived expression (one
    display per question the claims ask), and under it the claims that state
    it, each with its source and its own form inline; then the worked numbers
    the engine reproduces. Errata are on their own page (:func:`errata`)."""
    out = []
    reproduced = [r for r in results if r.status == "reproduced"]
    forms = [r for r in reproduced if r.claim.kind == "form"]
    numbers = [r for r in reproduced if r.claim.kind == "number"]
    if forms:
        out.append(r"\subsection*{The sources' forms, derived}")
        out.append(tex("Each display is the engine's result, summed from the inventory above; the claims under it "
                       "state it in their own form, reproduced exactly (expand(engine - form) = 0)."))
        for group in form_groups(forms):
            if group.engine is not None:
                out.append(display(simplified(group.engine)))
            out.append(r"\begin{itemize}\setlength{\itemsep}{1pt}")
            for result in group.results:
                claim = result.claim
                unit = "" if claim.unit in ("1", "") else f" [{tex(claim.unit)}]"
                conditions = (r", \emph{if} " + tex(claim.conditions)) if claim.conditions else ""
                form = paper_form(claim.stated)
                # The claim's own form closes its item; a long one on a line of its own (a
                # \left( ... \right) group cannot break across lines).
                stated = (f"stated as ${form}$" if len(form) < 48
                          else rf"stated as\\[1pt]\hspace*{{1.5em}}$\displaystyle {form}$")
                out.append(rf"\item {_cite(claim)}, {_id(claim)}{_reading(result)}{unit}{conditions}; {stated}")
            out.append(r"\end{itemize}")
    if numbers:
        out += [r"\subsection*{Worked numbers the engine reproduces}",
                r"\begin{longtable}{@{}>{\raggedright\arraybackslash}p{0.46\textwidth}"
                r">{\raggedright\arraybackslash}p{0.2\textwidth}rl@{}}", r"\toprule",
                r"claim & source & value & unit \\", r"\midrule", r"\endhead"]
        for result in numbers:
            claim = result.claim
            out.append(rf"{_id(claim)}{_reading(result)} & {_cite(claim)} & {tex(claim.stated)} & {tex(claim.unit)} \\")
        out += [r"\bottomrule", r"\end{longtable}"]
    return out


# --- the ledgers' derivations ----------------------------------------------

def _shape(shape) -> str:
    return "$" + r" \times ".join(latex(x, symbol_names=LATEX_NAMES) for x in shape) + "$"


def _name(name: str) -> str:
    return r"\texttt{" + tex(name) + "}"


def saved_table(inventory: Inventory, sum_row: bool = True) -> list[str]:
    """One row per saved tensor (shape, dtype, bytes, split axis, recompute group), the sum (a last
    row, or with ``sum_row=False`` a display below: a long sum would widen the bytes column), and the
    sum by split axis."""
    out = [r"\begin{longtable}{@{}llllll@{}}", r"\toprule",
           r"tensor & shape & dtype & bytes & split axis & recompute group \\", r"\midrule", r"\endhead"]
    for term in inventory:
        out.append(rf"{_name(term.name)} & {_shape(term.shape)} & {tex(term.dtype)} ({term.bytes_per_element} B) & "
                   rf"{math(term.bytes)} & {tex(term.split.value)} & {tex(term.group.value)} \\")
    total = activations.total_bytes(inventory)
    if sum_row:
        out += [r"\midrule", rf"sum & & & {math(total)} & & \\", r"\bottomrule", r"\end{longtable}"]
    else:
        out += [r"\bottomrule", r"\end{longtable}", r"\noindent Sum, bytes per layer:" + display(simplified(total))]
    out.append(r"\noindent By split axis (the origin of the coefficients):")
    out.append(r"\begin{center}\begin{tabular}{@{}ll@{}}\toprule axis & bytes per layer \\ \midrule")
    for axis in Axis:
        kept = Inventory(tuple(term for term in inventory if term.split is axis))
        if len(kept):
            out.append(rf"{tex(axis.value)} & {dmath(simplified(activations.total_bytes(kept)))} \\")
    out.append(r"\bottomrule\end{tabular}\end{center}")
    return out


def activations_derivation() -> list[str]:
    inventory = gpt.saved_tensors()
    out = [r"\subsection*{What one GPT layer saves for backward}",
           tex(f"{gpt.KORTHIKANTI}: every tensor autograd keeps, with its logical shape and bytes "
               "(2 B per float element, 1 B per dropout-mask element). Tensor parallelism divides the "
               "tensors on the tensor-parallel axis by t; sequence parallelism divides the "
               "sequence-parallel ones by t too; selective recompute drops the attention core; full "
               "recompute keeps the layer input only."),
           *saved_table(inventory)]
    out += [r"\subsection*{Per layer and per GPU, by strategy}",
            r"\begin{center}\begin{tabular}{@{}ll@{}}\toprule strategy & bytes per layer \\ \midrule"]
    for label, options in STRATEGIES:
        # 2.5pt between rows: a \displaystyle denominator (2bhs/t) would touch the next row (issue 23's collisions)
        out.append(rf"{tex(label)} & {dmath(simplified(evaluate('activations.per_layer', **options)))} \\"
                   r"\addlinespace[2.5pt]")
    out.append(r"\midrule")
    for label, options in (("TP + SP, first pipeline stage (1F1B)",
                            {"tensor_parallel": True, "sequence_parallel": True, "pipeline": True}),
                           ("TP + SP + selective, first stage (1F1B)",
                            {"tensor_parallel": True, "sequence_parallel": True, "recompute": "selective",
                             "pipeline": True})):
        out.append(rf"{tex(label)}, whole stage & {dmath(simplified(evaluate('activations.stage', **options)))} \\")
    factor = evaluate("activations.interleave_factor", tensor_parallel=True, sequence_parallel=True)
    out.append(rf"interleaved / 1F1B first stage & {dmath(simplified(factor))} \\")
    out.append(r"\bottomrule\end{tabular}\end{center}")
    out.append(tex("In-flight micro-batches on the first stage: " + Strategy(pipeline=True).describe()
                   + " holds p micro-batches of L/p layers."))
    return out + backend_conventions_block(inventory)


def backend_conventions_block(inventory: Inventory) -> list[str]:
    """The paper's count beside what real kernels save (``architectures.conventions``):
    the backend terms are named lines, and the paper's form is derived by removing them."""
    from ..models.architectures.conventions import BACKEND, CONVENTIONS, with_conventions
    from ..models.architectures.conventions import paper_form as without_backend

    out = [r"\subsection*{The paper's count and what the kernels save}",
           tex("Real kernels keep a little more than Korthikanti counts (LayerNorm's per-row mean and rstd), "
               "and PyTorch's CPU dropout keeps its noise in the activation dtype instead of a 1-byte mask. "
               "Each is a named term of the inventory (source: " + BACKEND + "); the paper's form is the "
               "same inventory with those terms removed by name. The tests trace the CPU convention's "
               "inventory against PyTorch to the byte; the CUDA one is what the CUDA kernels save "
               "(not traced here: no GPU in the test setup)."),
           r"\begin{center}\begin{tabular}{@{}ll@{}}\toprule inventory & bytes per layer (no parallelism) \\ \midrule"]
    for name, conv in CONVENTIONS.items():
        kernels = with_conventions(inventory, conv)
        out.append(rf"{tex(name.upper())} kernels & {dmath(simplified(activations.total_bytes(kernels)))} \\")
    paper = without_backend(with_conventions(inventory, CONVENTIONS["cuda"]))
    out.append(rf"CUDA minus the backend terms (the paper) & {dmath(simplified(activations.total_bytes(paper)))} \\")
    out.append(r"\bottomrule\end{tabular}\end{center}")
    return out


def params_table(inventory: Inventory) -> list[str]:
    """One row per parameter tensor, layer terms × L."""
    out = [r"\begin{longtable}{@{}lllp{0.3\textwidth}@{}}", r"\toprule",
           r"parameter & shape & count & note \\", r"\midrule", r"\endhead"]
    for term in inventory:
        count = term.count * (SYMBOLS["L"] if term.scope == "layer" else 1)
        out.append(rf"{_name(term.name)} & {_shape(term.shape)} & {math(count)} & {tex(term.note)} \\")
    return out + [r"\bottomrule", r"\end{longtable}"]


def params_derivation() -> list[str]:
    inventory = gpt.parameters()
    out = [r"\subsection*{The parameters of a GPT model}",
           tex(f"{gpt.MEGATRON_PARAMS}; layer terms repeat L times. Tied embedding, learned positions."),
           *params_table(inventory),
           r"\noindent All parameters:" + display(simplified(params.count(inventory))),
           r"\noindent Megatron Eq 2 scopes (layers and the tied embedding):"
           + display(simplified(params.count(inventory, params.eq2_scopes()))),
           r"\noindent Kaplan's $N$ (layer weight matrices only):"
           + display(params.non_embedding_weights(inventory))]
    return out


def states_derivation() -> list[str]:
    out = [r"\subsection*{Bytes per parameter, by recipe}",
           r"\begin{longtable}{@{}lp{0.25\textwidth}p{0.45\textwidth}@{}}", r"\toprule",
           r"recipe & blocks (B/param) & condition; source \\", r"\midrule", r"\endhead"]
    for recipe in states.RECIPES.values():
        out.append(rf"{tex(recipe.name)} & {tex(recipe.tally)} & {tex(recipe.condition)}; {tex(recipe.source)} \\")
    out += [r"\bottomrule", r"\end{longtable}",
            tex("Per GPU, bf16 mixed-precision Adam, even split over t·p, ZeRO stage z over d "
                "(stage 1 splits the optimizer states, 2 also the gradients, 3 also the parameters):"),
            r"\begin{center}\begin{tabular}{@{}ll@{}}\toprule ZeRO stage & bytes per GPU \\ \midrule"]
    for stage in states.ZERO_STAGES:
        out.append(rf"{stage} & {dmath(simplified(states.per_gpu(states.RECIPES['bf16-adam'], stage)))} \\")
    out.append(r"\bottomrule\end{tabular}\end{center}")
    return out


def matmul_table(inventory: Inventory) -> list[str]:
    """One row per matmul (batch, M×K×N, forward FLOPs, kind), then forward and training per micro-batch."""
    out = [r"\begin{longtable}{@{}lllll@{}}", r"\toprule",
           r"matmul & batch & $M \times K \times N$ & forward FLOPs & kind \\", r"\midrule", r"\endhead"]
    for mm in inventory:
        kind = "weight" if mm.weight else "activation" + (", attention core" if mm.group.value == "attention core"
                                                          else "")
        out.append(rf"{_name(mm.name)} & {math(mm.batch)} & {_shape((mm.M, mm.K, mm.N))} & "
                   rf"{math(mm.forward_flops)} & {tex(kind + ', ' + mm.scope)} \\")
    out += [r"\bottomrule", r"\end{longtable}",
            r"\begin{center}\begin{tabular}{@{}ll@{}}\toprule per micro-batch & FLOPs \\ \midrule",
            rf"forward & {dmath(simplified(flops.forward(inventory)))} \\",
            rf"training, model FLOPs & {dmath(simplified(flops.model_training(inventory)))} \\"]
    return out


def flops_derivation() -> list[str]:
    inventory = gpt.matmuls()
    out = [r"\subsection*{The matmuls of one GPT layer and the logits}",
           tex(f"{gpt.NARAYANAN}: forward 2·batch·M·K·N per matmul; backward twice the forward."),
           *matmul_table(inventory)]
    for recompute in ("selective", "full"):
        out.append(rf"training, hardware, {recompute} recompute & "
                   rf"{dmath(simplified(flops.hardware_training(recompute, inventory)))} \\")
    out.append(r"\bottomrule\end{tabular}\end{center}")
    return out


#: The other inventories (``symbolic.models.architectures``) the bill itemises, each a section of its own:
#: arch, section title, and what the layer is, as the inventory's module states it.
NATIVE = (
    ("llama", "LLaMA layer",
     "Touvron et al. 2023 §2.2, Ainslie et al. 2023 (GQA), Shazeer 2020 (SwiGLU), as HF transformers 5.24.0 "
     "LlamaDecoderLayer runs it with a fused attention kernel (FlashAttention-2 §3.1: Q, K, V, the output and an "
     "fp32 log-sum-exp per row are kept, no s×s tensor): RMSNorm keeping its fp32 input copy and rstd, a "
     "heads of width h/a for queries and g for keys and values, RoPE, a SwiGLU MLP of width f, no biases, "
     "no dropout, untied output layer."),
    ("moe", "Mixture-of-experts layer",
     "Fedus et al. 2021 §2.1, Jiang et al. 2024 §2.1 (Mixtral), as HF transformers 5.24.0 "
     "MixtralSparseMoeBlock runs it: the LLaMA attention, then a router (h to E), top-k routing with the k "
     "weights renormalised, E experts of width f_e, each receiving T_e = s·b·k/E tokens (balanced routing), "
     "and E_s shared experts every token goes through (DeepSeekMoE §3.2)."),
)


def native_derivation(arch: str, intro: str) -> list[str]:
    """A LLaMA or MoE section: saved tensors, per-layer bytes by strategy, parameters (MoE: N_total and
    N_active), matmuls and FLOPs, all summed from the arch's inventories with its symbolic defaults."""
    from ..bill.derive import fused_backward_recompute
    from ..models.architectures import ARCHITECTURES

    module = ARCHITECTURES[arch]
    saved, parameters, matmuls = module.saved_tensors(), module.parameters(), module.matmuls()
    word = {"llama": "LLaMA", "moe": "mixture-of-experts"}[arch]
    out = [rf"\subsection*{{What one {word} layer saves for backward}}", tex(intro), *saved_table(saved, sum_row=False),
           r"\subsection*{Per layer, by strategy}",
           r"\begin{center}\begin{tabular}{@{}ll@{}}\toprule strategy & bytes per layer \\ \midrule"]
    for label, options in STRATEGIES:
        out.append(rf"{tex(label)} & {dmath(simplified(evaluate('activations.per_layer', arch=arch, **options)))} \\"
                   r"\addlinespace[2.5pt]")
    out += [r"\bottomrule\end{tabular}\end{center}",
            rf"\subsection*{{The parameters of a {word} model}}", *params_table(parameters),
            r"\noindent All parameters" + (r" ($N_\mathrm{total}$, every expert: the model states hold them)"
                                           if arch == "moe" else "") + ":"
            + display(simplified(params.count(parameters)))]
    if arch == "moe":
        out.append(r"\noindent Active parameters ($N_\mathrm{active}$, the k experts a token goes through: "
                   r"the FLOPs scale with them):" + display(simplified(params.count(module.parameters(active=True)))))
    extra = fused_backward_recompute(saved, matmuls)
    out += [rf"\subsection*{{The matmuls of one {word} layer and the logits}}",
            tex("Forward 2·batch·M·K·N per matmul; backward twice the forward; the fused attention kernel "
                "recomputes Q·Kᵀ in its backward (hardware FLOPs)."),
            *matmul_table(matmuls),
            rf"training, hardware (fused kernel's recompute) & "
            rf"{dmath(simplified(flops.hardware_training('none', matmuls) + extra))} \\",
            r"\bottomrule\end{tabular}\end{center}"]
    return out


#: The families the sheet gives a page each, as the bill reads them (:mod:`symbolic.models.hf`):
#: label, title, HF ``model_type``, and the built-in model whose config gives the page its
#: structure and its numbers — or None: the structure transformers 5.24.0's defaults give the type
#: (:data:`STRUCTURE_CONFIG`; only letters are shown, no numbers).
FAMILY_PAGES = (
    ("llama", "Llama / Mistral", "llama", "llama-3-8b"),
    ("qwen2", "Qwen2", "qwen2", None),
    ("qwen3", "Qwen3", "qwen3", "qwen3-8b"),
    ("gemma", "Gemma", "gemma", None),
    ("gemma2", "Gemma-2", "gemma2", "gemma-2-9b"),
    ("gemma3", "Gemma-3 (text)", "gemma3_text", None),
    ("phi3", "Phi-3", "phi3", None),
    ("olmo2", "OLMo-2", "olmo2", None),
    ("gpt_neox", "GPT-NeoX", "gpt_neox", None),
    ("gpt2", "GPT-2 (HF)", "gpt2", None),
    ("mixtral", "Mixtral", "mixtral", "mixtral-8x22b"),
    ("qwen2_moe", "Qwen2-MoE", "qwen2_moe", None),
    ("qwen3_moe", "Qwen3-MoE", "qwen3_moe", "qwen3-30b-a3b"),
    ("deepseek_v2", "DeepSeek-V2", "deepseek_v2", None),
    ("deepseek_v3", "DeepSeek-V3", "deepseek_v3", "deepseek-v3"),
)


def _registered_pages() -> tuple:
    """The pages of the families read by their own modules (``models.families.READERS``), from the
    registry: a family added there gets its page here with no edit."""
    from ..models.families import READERS

    return tuple((model_type, family.TITLE, model_type, None) for model_type, family in READERS.items())


FAMILY_PAGES = FAMILY_PAGES + _registered_pages()

#: The sizes a family page without a built-in model is read at: only its structure (the parts,
#: which letters appear) is used, never these values. 32 heads of 128 over h = 4096: a family whose
#: default head_dim differs from h/a (Gemma's 256) gets heads of width d_h, as its published models
#: have. DeepSeek-V2's config class has no top-k default (None): 6, DeepSeek-V2's own.
STRUCTURE_CONFIG = {"num_hidden_layers": 1, "hidden_size": 4096, "num_attention_heads": 32, "vocab_size": 32000}
STRUCTURE_EXTRA = {"deepseek_v2": {"num_experts_per_tok": 6},
                   # Llama 4: two layers, one MoE and one dense (Maverick interleaves them), both
                   # with RoPE: the page shows the MoE and the dense layer (L_d); the NoPE layers' share
                   # (L_n) is the bill's (its fractions overran the page's rows)
                   "llama4_text": {"num_hidden_layers": 2, "moe_layers": [0]},
                   # two layers, the first dense (first_k_dense_replace 1; ERNIE-4.5's moe_layer_start_index 1),
                   # so the page shows the MoE and the dense layer (L_d); dots.llm1's own MoE numbers (its config
                   # class leaves them None)
                   "glm4_moe": {"num_hidden_layers": 2},
                   "ernie4_5_moe": {"num_hidden_layers": 2},
                   "dots1": {"num_hidden_layers": 2, "first_k_dense_replace": 1, "n_routed_experts": 128,
                             "n_shared_experts": 2, "num_experts_per_tok": 6},
                   # Ministral: transformers 5.24.0 builds it only with head_dim given (the reader refuses null)
                   "ministral": {"head_dim": 128},
                   # Gemma 3n: one plain layer (no KV sharing; one layer has no default sparsity): the KV-shared
                   # and sparse layers' shares (L_kv, L_sp) are the bill's, as Llama 4's L_n
                   "gemma3n_text": {"num_kv_shared_layers": 0},
                   # Nemotron-H: its default blocks include an MoE one (not modelled): one block of each other kind
                   "nemotron_h": {"num_hidden_layers": 3, "layer_types": ["linear_attention", "full_attention", "mlp"]},
                   # LFM2: a conv and an attention layer (its published models mix 10 and 6), so the page shows
                   # both kinds as their shares (L_c); the config's default is every layer attention
                   "lfm2": {"num_hidden_layers": 2, "layer_types": ["conv", "full_attention"]},
                   # Qwen3-Next: a gated DeltaNet and a gated attention layer (L_l), both MoE (its default layer 0
                   # of one is linear attention alone)
                   "qwen3_next": {"num_hidden_layers": 2, "layer_types": ["linear_attention", "full_attention"]}}


def family_model(model_type: str, builtin: str | None):
    """The :class:`ModelConfig` a family page derives from: the built-in model, or the HF reader's
    model of :data:`STRUCTURE_CONFIG` with the family's defaults."""
    from ..models.builtin import preset
    from ..models.hf import from_hf_dict

    if builtin is not None:
        return preset(builtin)
    raw = {"model_type": model_type, **STRUCTURE_CONFIG, **STRUCTURE_EXTRA.get(model_type, {})}
    return from_hf_dict(raw, model_type, where=f"the {model_type} structure")


def collected(expr: Expr, unit: Expr, display: bool = True) -> str:
    """``expr`` as ``unit`` times its expanded quotient (inline math that breaks at each top-level
    + or −, so a long family form stays on the page); the coefficients are the quotient's
    :meth:`as_coefficients_dict`: the GPT layer's bytes read sbh·(34 + 5as/h). ``display``: full-size
    fractions (a table row, one line); otherwise text-size ones, for a form that wraps in running text."""
    inner = expand(expr / unit)
    return (f"${latex(unit, symbol_names=LATEX_NAMES)}" + r" \cdot {}$(" + ("$\\displaystyle " if display else "$")
            + latex(inner, symbol_names=LATEX_NAMES) + "$)")


def _layer_only(inventory: Inventory) -> Inventory:
    return Inventory(tuple(term for term in inventory if term.scope == "layer"))


def family_forms(model) -> dict[str, Expr]:
    """A family's per-layer quantities, summed from the inventories the bill itemises
    (:func:`symbolic.bill.derive.inventories`): saved bytes of one layer and one micro-batch (no
    parallelism), parameters of one layer, forward FLOPs of one layer per token, and model FLOPs
    per token of the whole model (forward + backward, the logits included)."""
    from ..bill.derive import inventories

    param_inv, saved_inv, mm_inv = inventories(model)
    L_ = SYMBOLS["L"]
    return {"saved": activations.total_bytes(saved_inv),
            "params": params.count(_layer_only(param_inv)) / L_,
            "params_all": params.count(param_inv),
            "flops": flops.per_token(flops.forward(_layer_only(mm_inv))) / L_,
            "flops_all": flops.per_token(flops.model_training(mm_inv))}


def family_units() -> dict[str, Expr]:
    """The units a family page collects its forms in: saved bytes in s·b·h (Korthikanti's),
    parameters and FLOPs per token in h² (Narayanan's 12h² and 24h² per GPT layer)."""
    s_, b_, h_ = SYMBOLS["s"], SYMBOLS["b"], SYMBOLS["h"]
    return {"saved": s_ * b_ * h_, "params": h_**2, "flops": h_**2, "params_all": h_**2, "flops_all": h_**2}


def _recipe_words(model) -> str:
    """The parts of a family's layer, from its :class:`Recipe` (the fields that differ from a plain
    pre-norm RMSNorm GQA SwiGLU layer), or the inventory the model is billed with."""
    from dataclasses import fields as dataclass_fields

    from ..models.config import Recipe

    if model.recipe is None:
        return {"llama": "the LLaMA inventory (pre-norm RMSNorm, GQA, RoPE, SwiGLU, fused attention)",
                "moe": "the mixture-of-experts inventory (LLaMA attention, a router, top-k routed SwiGLU experts)",
                "gpt": "the GPT inventory (LayerNorm, MHA, GeLU MLP" + (f" as HF's {model.mlp} chain" if
                                                                         model.mlp != "gelu" else "")
                       + ", learned positions)"}.get(model.arch, model.arch)
    plain = Recipe(model.recipe.family)
    words = [f"{field.name} = {getattr(model.recipe, field.name)}" for field in dataclass_fields(Recipe)
             if field.name != "family" and getattr(model.recipe, field.name) != getattr(plain, field.name)]
    return "a composed layer (symbolic.models.architectures.composed): " + (
        ", ".join(words) if words else "the plain recipe (pre-norm RMSNorm, GQA, SwiGLU)")


def layer_kinds(model) -> list[tuple[str, dict]]:
    """The kinds of layer a family page shows, each with the substitution that selects it: one
    layer; or, for an MoE model with L_d dense layers (DeepSeek's first_k_dense_replace), whose
    per-layer terms the bill averages as (L − L_d)/L MoE + L_d/L dense, the MoE layer (L_d = 0)
    and the dense one (L_d = L); for a hybrid with L_s Mamba layers (Granite-4.0-H), the Mamba layer
    (L_s = L) and the attention one (L_s = 0)."""
    if model.recipe is not None and model.recipe.mamba == "layers":
        L_s, L_ = SYMBOLS["L_s"], SYMBOLS["L"]
        return [("a Mamba layer (L_s = L)", {L_s: L_}), ("an attention layer (L_s = 0)", {L_s: 0})]
    if model.recipe is not None and model.recipe.mamba == "blocks":  # Nemotron-H: one block per layer
        L_s, L_a, L_ = SYMBOLS["L_s"], SYMBOLS["L_a"], SYMBOLS["L"]
        return [("a Mamba block (L_s = L)", {L_s: L_, L_a: 0}), ("an attention block (L_a = L)", {L_s: 0, L_a: L_}),
                ("an MLP block (L_s = L_a = 0)", {L_s: 0, L_a: 0})]
    from ..models.layer_kinds import FULL_ATTENTION, LAYER_KINDS

    L_ = SYMBOLS["L"]
    hybrid = [letter for letter in LAYER_KINDS if letter in dict(model.dims)]
    if hybrid:  # a hybrid (models.layer_kinds): each kind of layer whole, its letter L and the others 0 (MoE layers)
        base = {SYMBOLS["L_d"]: 0} if model.recipe.dense_layers else {}
        none = {SYMBOLS[letter]: 0 for letter in hybrid}
        return ([(f"a {FULL_ATTENTION} layer ({', '.join(f'{x} = 0' for x in hybrid)})", base | none)]
                + [(f"a {LAYER_KINDS[letter]} layer ({letter} = L)", base | none | {SYMBOLS[letter]: L_})
                   for letter in hybrid])
    if model.recipe is None or not model.recipe.dense_layers:
        return [("one layer", {})]
    L_d = SYMBOLS["L_d"]
    return [("an MoE layer (L_d = 0)", {L_d: 0}), ("a dense layer (L_d = L)", {L_d: L_})]


def _kinds_words(model) -> str:
    """How the bill averages a family's kinds of layer, for its page's introduction."""
    from ..models.layer_kinds import LAYER_KINDS

    hybrid = [letter for letter in LAYER_KINDS if letter in dict(model.dims)]
    if hybrid:
        shares = ", ".join(f"{x}/L of a {LAYER_KINDS[x]} one" for x in hybrid)
        moe = "; its MoE layers are shown" if model.recipe.dense_layers else ""
        return (" The bill's per-layer terms are the average over the L layers: (L - " + " - ".join(hybrid)
                + f")/L of a full-attention layer, {shares}{moe}; each kind is shown whole.")
    return (" The bill's per-layer terms are the average over the L layers, L_d of them dense: (L - L_d)/L of an "
            "MoE layer and L_d/L of a dense one; each kind is shown whole.")


def family_page(label: str, title: str, model_type: str, builtin: str | None) -> list[str]:
    """A family's page: its parts, then its saved bytes per layer collected in s·b·h (and under the
    strategies), its parameters and FLOPs per token per layer in h², all summed from the inventories
    the bill itemises — and, for a built-in model, their values at its dimensions."""
    from ..bill.derive import inventories
    from ..core.numeric import exact_int, fmt

    model = family_model(model_type, builtin)
    forms, units = family_forms(model), family_units()
    kinds = layer_kinds(model)
    (first_kind, first), others = kinds[0], kinds[1:]
    where = (f"read from the built-in model {builtin} ({model.source})" if builtin else
             f"the structure transformers 5.24.0's defaults give model_type {model_type}")
    # its long forms wrap in running text with text-size fractions (display=False), and lines closer than 1pt
    # are set 1pt apart, on this page only: wrapped \displaystyle fractions collided (issue 23)
    out = [r"\clearpage", r"\begingroup\setlength{\lineskiplimit}{1pt}\setlength{\lineskip}{1pt}",
           rf"\section{{Family: {tex(title)}}}\label{{sec:fam_{label}}}",
           # sloppy, breakable: module paths and recipe fields are long words
           r"\begin{sloppypar}" + breakable(
               f"HF model_type {model_type}, {where}; billed as {_recipe_words(model)}. Every form below "
               "is summed from the inventories the bill itemises (the tests trace them against the real HF "
               "decoder layer)." + ((" The bill's per-layer terms are the average over the L layers, L_s of "
                                     "them Mamba layers: L_s/L of a Mamba layer and (L - L_s)/L of an attention "
                                     "one; each kind is shown whole." if model.recipe.mamba == "layers"
                                     else " The bill's per-layer terms are the average over the L blocks: L_s/L of "
                                     "a Mamba block, L_a/L of an attention one and the rest of an MLP one; each "
                                     "kind is shown whole." if model.recipe.mamba == "blocks"
                                     else _kinds_words(model)) if others else "")) + r"\end{sloppypar}",
           rf"\subsection*{{Saved bytes per layer, collected in $s b h$}}",
           r"\noindent " + tex(f"{first_kind[0].upper()}{first_kind[1:]}, one micro-batch, no parallelism:")
           + " " + collected(forms["saved"].subs(first), units["saved"], display=False) + r"\par"]
    saved_inv = inventories(model)[1]
    out += [r"\begin{longtable}{@{}>{\raggedright\arraybackslash}p{0.25\textwidth}"
            r">{\raggedright\arraybackslash}p{0.71\textwidth}@{}}", r"\toprule strategy & bytes per layer \\",
            r"\midrule\endhead"]
    for strategy_label, options in STRATEGIES[1:]:
        expr = activations.per_layer(Strategy(**options), saved_inv).subs(first)
        # 2.5pt between rows (booktabs' \addlinespace: space added whatever the content's depth): a row's
        # \displaystyle denominators would otherwise touch the next row's numerators (a tabular row is as
        # tall as its content, with no interline glue; issue 23)
        # a form of more than 16 terms (a Mamba2 mixer's) wraps over several lines of its cell: text-size
        # fractions there, as in running text (wrapped \displaystyle ones collided)
        long = len(Add.make_args(expand(expr / units["saved"]))) > 16
        out.append(rf"{tex(strategy_label)} & {collected(expr, units['saved'], display=not long)} "
                   r"\\\addlinespace[2.5pt]")
    out += [r"\bottomrule\end{longtable}"]
    for kind, at in others:
        out.append(r"\noindent " + tex(f"{kind[0].upper()}{kind[1:]}, no parallelism:") + " "
                   + collected(forms["saved"].subs(at), units["saved"], display=False) + r"\par")
    out.append(r"\subsection*{Parameters and FLOPs, collected in $h^2$}")
    for kind, at in kinds:
        name = "" if kind == "one layer" else " (" + kind + ")"
        out += [r"\noindent " + tex(f"Parameters of one layer{name}:") + " "
                + collected(forms["params"].subs(at), units["params"], display=False) + r"\par",
                r"\noindent " + tex(f"Forward FLOPs of one layer{name}, per token:") + " "
                + collected(forms["flops"].subs(at), units["flops"], display=False) + r"\par"]
    out += [r"\noindent All parameters (layers $\times L$, embeddings, final norm"
            + (", untied output" if not model.tied else "") + "): "
            + collected(forms["params_all"], units["params_all"], display=False) + r"\par",
            r"\noindent Model FLOPs per token, whole model (forward + backward $= 3\times$ forward, logits "
            "included): " + collected(forms["flops_all"], units["flops_all"], display=False) + r"\par"]
    if builtin is not None:
        values = {SYMBOLS[k]: v for k, v in model.values().items() if k in SYMBOLS} | {SYMBOLS["b"]: 1}
        words = []
        for kind, subs in kinds:
            at = values | {letter: exact_int(Integer(0) + value, values) for letter, value in subs.items()}
            saved = exact_int(forms["saved"], at)
            words.append(f"{kind.split(' (')[0]} saves {fmt(saved, 'MB')} ({saved:,} B) for one sequence, holds "
                         f"{exact_int(forms['params'], at):,} parameters and does {exact_int(forms['flops'], at):,} "
                         "forward FLOPs per token")
        out.append(r"\noindent " + tex(
            f"At {builtin} (s = {model.seq:,}, b = 1): " + "; ".join(words) + ". The model: "
            f"{exact_int(forms['params_all'], values):,} parameters, {exact_int(forms['flops_all'], values):,} "
            "model FLOPs per token.") + r"\par")
    return out + [r"\endgroup"]


def units_derivation() -> list[str]:
    return [tex("GB = 10^9 B, GiB = 2^30 B, MiB = 2^20 B; FLOPs counted as 2 per multiply-accumulate. "
                "Claims on quantities outside the four ledgers are listed here too.")]


DERIVATIONS = {"activations": activations_derivation, "params": params_derivation,
               "model_states": states_derivation, "flops": flops_derivation, "units": units_derivation}


# --- the document ----------------------------------------------------------

PREAMBLE = r"""\documentclass[10pt]{article}
\usepackage[T1]{fontenc}
\usepackage{lmodern}
\usepackage[a4paper,margin=18mm]{geometry}
\usepackage{amsmath,amssymb}
\usepackage{booktabs,longtable,array,etoolbox}
\usepackage[hidelinks]{hyperref}
\setlength{\parindent}{0pt}
\setlength{\parskip}{4pt}
\setlength{\tabcolsep}{4pt}
\renewcommand{\arraystretch}{1.25}
\AtBeginEnvironment{longtable}{\small}
\allowdisplaybreaks
\title{Transformer training memory and compute: the formula sheet}
\author{generated by \texttt{python -m symbolic sheet} from the engine's inventories and \texttt{derivations/}}
\date{}
"""


def conventions() -> list[str]:
    # a longtable: the letters run on over the title page (a tabular this long would leave it empty)
    out = [r"\section*{Notation}", r"\begin{longtable}{@{}ll@{}}\toprule letter & meaning \\ \midrule\endhead"]
    for dim in DIMENSIONS.values():
        out.append(rf"${dim.latex}$ & {tex(dim.meaning)} \\")
    out += [r"\bottomrule\end{longtable}",
            tex("Bytes per element: " + ", ".join(f"{k} {v} B" for k, v in DTYPE_BYTES.items())
                + ". Every result below is an exact sympy expression; every paper form is checked by "
                "expand(engine - form) == 0, every number exactly, rounded half up to the printed decimals.")]
    return out


def sources() -> list[str]:
    """The bibliography (:mod:`symbolic.claims.sources`, docs/sources.md): every key the sheet cites."""
    from ..claims.sources import BIBLIOGRAPHY

    out = [tex("The citations in this sheet resolve here (docs/sources.md has the full references and, for the "
               "three source notes, their sections). The seeds are technical notes, in Chinese, that the "
               "project implements; their claims are data in derivations/."),
           # sloppy: a long title of unbreakable words stretches the spaces instead of running off the page
           r"\begin{sloppypar}\begin{itemize}\setlength{\itemsep}{0pt}"]
    for source in BIBLIOGRAPHY:
        out.append(rf"\item \textbf{{[{tex(source.key)}]}} {tex(source.cite)}, \emph{{{tex(source.title)}}}"
                   + (f", arXiv {tex(source.arxiv)}" if source.arxiv else "")
                   + (f" --- {tex(source.about)}" if source.about else ""))
    out.append(r"\end{itemize}\end{sloppypar}")
    return out


def sheet(results: list[Result] | None = None) -> str:
    """The whole formula sheet as LaTeX source (deterministic).

    The sections run on without page breaks (a page holds a full page of
    text); the errata and the sources each start a page of their own."""
    if results is None:
        from ..claims.claims import load_all
        results = [check(claim) for claim in load_all()]
    out = [PREAMBLE, r"\begin{document}", r"\maketitle",
           tex("Every result below is summed by the engine from the inventories of saved tensors, parameters "
               "and matmuls it lists, then set beside the forms the sources state. Section 1 onwards: one ledger "
               "each, its claims once, under the result they state; the errata (claims of the sources the engine "
               "does not reproduce, with the reason and the correction) close the sheet on pages of their own. The "
               "sources are listed below the notation, by the keys the sections cite."),
           *conventions(), r"\section*{Sources}", *sources()]
    by_ledger = {name: [r for r in results if ledger_of(r.claim) == name] for name, _, _ in LEDGERS}
    for name, title, _ in LEDGERS:
        if name == "units" and not by_ledger[name]:
            continue
        out += [rf"\section{{{title}}}\label{{sec:{name}}}", *DERIVATIONS[name](), *claims_block(by_ledger[name])]
    for arch, title, intro in NATIVE:
        out += [rf"\section{{{title}}}\label{{sec:{arch}}}", *native_derivation(arch, intro)]
    for page in FAMILY_PAGES:
        out += family_page(*page)
    out += [r"\clearpage", r"\section{Errata}\label{sec:errata}", *errata(results),
            r"\label{sheet:end}", r"\end{document}", ""]
    return "\n".join(out)


def errata(results: list[Result]) -> list[str]:
    """Claims the engine does not reproduce under any reading their source allows, with the reason and
    the correction; then the claims the source's text cannot decide (underdetermined, counted apart:
    what the source does not state, and what the engine gives under its own assumption)."""
    found = [r for r in results if r.status in ("erratum", "failed")]
    undecided = [r for r in results if r.status == "underdetermined"]
    out = [tex(f"{len(found)} claims of the sources are errata: the engine does not reproduce them under any "
               "reading the source allows; each records why and the value the engine gives instead.")
           if found else tex("No errata: every claim is reproduced under some reading its source allows.")]
    if undecided:
        out[0] += " " + tex(f"{len(undecided)} more are underdetermined, listed after them: the source does not "
                            "state an input that decides them.")
    for result in found:
        claim = result.claim
        # sloppy: a long claim id (unbreakable monospace runs) stretches the heading's spaces instead of
        # running off the page
        out += [rf"\subsection*{{\sloppy {_id(claim)} ({_cite(claim)})}}",
                r"\noindent Stated: " + _stated(claim, claim.stated) + r"\par",
                r"\noindent Engine (the recorded correction): " + (_stated(claim, claim.erratum.corrected) if claim.erratum
                                         else tex(result.engine)) + r"\par",
                r"\noindent " + tex(result.message or (claim.erratum.reason if claim.erratum else "")) + r"\par"]
        if result.reading:
            out.append(r"\noindent\emph{Under:} " + tex(result.reading) + r"\par")
        if claim.conditions:
            out.append(r"\noindent\emph{Conditions:} " + tex(claim.conditions) + r"\par")
    if undecided:
        out += [r"\bigskip\noindent\textbf{\large Underdetermined}\par\smallskip",
                r"\noindent " + tex("Neither reproduced nor errata: the engine's value stands beside the source's "
                                     "as its own estimate, under the assumption it names.") + r"\par"]
    for result in undecided:
        claim = result.claim
        out += [rf"\subsection*{{\sloppy {_id(claim)} ({_cite(claim)})}}",
                r"\noindent Stated: " + _stated(claim, claim.stated) + r"\par",
                r"\noindent Engine: " + _stated(claim, claim.underdetermined.engine) + r"\par",
                r"\noindent " + tex(result.message) + r"\par"]
        if claim.conditions:
            out.append(r"\noindent\emph{Conditions:} " + tex(claim.conditions) + r"\par")
    return out


def _stated(claim: Claim, text: str) -> str:
    if claim.kind == "form":
        return r"\[ " + paper_form(text) + r" \]"
    return tex(text) + ("" if claim.unit in ("1", "") else " " + tex(claim.unit))


# --- compiling ---------------------------------------------------------------

class LatexError(RuntimeError):
    """pdflatex is missing or failed; the message names the fix or the log line."""


def compile_pdf(tex_path: Path, runs: int = 2, progress=None) -> Path:
    """Compile ``tex_path`` with pdflatex (twice: longtable widths settle on
    the second run) into a PDF beside it; the auxiliary files stay in a
    temporary folder except the ``.aux`` (page labels, for the tests)."""
    pdflatex = shutil.which("pdflatex")
    if pdflatex is None:
        raise LatexError("pdflatex not found: install Debian's texlive-latex-base and "
                         "texlive-latex-recommended (scripts/test does)")
    tex_path = Path(tex_path).resolve()
    with tempfile.TemporaryDirectory() as work:
        for run in range(runs):
            if progress is not None:
                progress(0, f"pdflatex, run {run + 1} of {runs}")
            done = subprocess.run([pdflatex, "-interaction=nonstopmode", "-halt-on-error",
                                   f"-output-directory={work}", str(tex_path)],
                                  capture_output=True, text=True, errors="replace", cwd=work, timeout=300)
            if done.returncode != 0:
                errors = [line for line in done.stdout.splitlines() if line.startswith("!")]
                raise LatexError(f"pdflatex failed on {tex_path.name}: {errors[0] if errors else 'see its log'}")
            if progress is not None:
                progress()
        pdf = tex_path.with_suffix(".pdf")
        shutil.copy(Path(work) / (tex_path.stem + ".pdf"), pdf)
        shutil.copy(Path(work) / (tex_path.stem + ".aux"), tex_path.with_suffix(".aux"))
        shutil.copy(Path(work) / (tex_path.stem + ".log"), tex_path.with_suffix(".log"))
    return pdf
