"""A model's structure: what the shape of its inventories depends on, not its numbers.

One frozen, named value (:class:`Structure`) built from a
:class:`~symbolic.models.config.ModelConfig` by :func:`structure_of`; the
bill, the step time and the plan key their caches by it and read it by field
name. Which inventories a structure has is the architecture registry's
knowledge (:data:`symbolic.models.architectures.INVENTORIES`, one builder per
``arch``), so a new family is its recipe and its reader — no ledger changes.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from .config import ModelConfig, Recipe

#: HF's element-wise GeLU chains a GPT layer may carry (``parts.CHAINS``); any other GeLU is the fused one.
GPT_CHAINS = ("gelu_new", "gelu_fast")


@dataclass(frozen=True)
class Structure:
    """The structural half of a model (hashable: it keys the derivation caches).

    arch: the inventory builder (``gpt``, ``llama``, ``moe``, ``composed``).
    symbolic_ffn: the MLP width is the letter f (a config's ffn), not GPT's 4h.
    tied: the output layer reuses the word embedding. positions: ``learned``
    or ``rope``. shared_experts: the ``moe`` inventory's E_s shared experts.
    position_table: a learned table of P rows (n_positions), not sized by s.
    activation: a GPT layer's GeLU (``gelu``, or HF's ``gelu_new`` /
    ``gelu_fast`` chains). recipe: a composed layer's parts (None otherwise).
    flash_attention: the layout runs the fused attention kernel
    (``layout.strategies.flash_attention`` on the saved tensors). loss: the
    layout's loss kernel (``models.losses``; ``Layout.loss``): it changes the
    output side the step time prices, not a layer's inventories.
    """

    arch: str
    symbolic_ffn: bool = False
    tied: bool = True
    positions: str = "learned"
    shared_experts: bool = False
    position_table: bool = False
    activation: str = "gelu"
    recipe: Recipe | None = None
    flash_attention: bool = False
    loss: str = "eager"

    def key(self) -> tuple:
        """The structure as JSON-able, hashable text: the derivation cache's key and the formula
        sheet's page digest (unchanged from the tuple this value replaces, so stored derivations
        and page names stay valid)."""
        key = (self.arch, self.symbolic_ffn, self.tied, self.positions, self.shared_experts)
        if self.position_table:
            key += ("position_table",)
        if self.arch == "gpt" and self.activation in GPT_CHAINS:
            key += (self.activation,)
        if self.recipe is not None:
            key += (self.recipe.key(),)
        if self.flash_attention:
            key += ("flash_attention",)
        if self.loss != "eager":  # eager unnamed: the keys stored before the loss was a choice stay valid
            key += (f"loss:{self.loss}",)
        return key

    @property
    def plain(self) -> bool:
        """One of the named inventories at its defaults (no table, chain or recipe of its own)."""
        return not self.position_table and self.activation not in GPT_CHAINS and self.recipe is None

    @property
    def output_norm(self) -> str:
        """The final norm of the output side (``architectures.output``): a composed layer's is
        its recipe's; GPT's LayerNorm; the LLaMA and MoE inventories' HF RMSNorm."""
        if self.recipe is not None:
            return "layernorm" if self.recipe.norm.startswith("layernorm") else "rmsnorm-eager"
        return "layernorm" if self.arch == "gpt" else "rmsnorm-eager"

    @property
    def has_experts(self) -> bool:
        """A mixture of experts (the ``moe`` inventory or a composed layer with a router): its
        routed experts go on the expert grid."""
        return self.arch == "moe" or (self.recipe is not None and self.recipe.moe != "none")

    def without_flash_attention(self) -> "Structure":
        return replace(self, flash_attention=False)

    def layer_only(self) -> "Structure":
        """The structure a layer's inventories depend on: the loss kernel set aside (the output side's)."""
        return replace(self, loss="eager")


def structure_of(model: ModelConfig, flash_attention: bool = False, loss: str = "eager") -> Structure:
    """``model``'s :class:`Structure` (``flash_attention``: the layout's fused kernel; ``loss``: its loss
    kernel)."""
    return Structure(arch=model.arch, symbolic_ffn=bool(model.ffn), tied=model.tied, positions=model.positions,
                     shared_experts=bool(model.shared_experts), position_table=bool(model.position_table),
                     activation=model.mlp if model.arch == "gpt" and model.mlp in GPT_CHAINS else "gelu",
                     recipe=model.recipe, flash_attention=flash_attention, loss=loss)
