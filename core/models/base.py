"""The contract between a model file and everything that runs it (engine, API, scheduler, browser, memory plan).

A model file defines a config (a frozen `ModelConfig` subclass built from GGUF metadata) and a model class
registered under its `general.architecture` names with `@register`. The class is built from a `WeightLoader`
(llmchat.models.weights), which either uploads tensors or only plans their sizes, so the same constructor answers
"what does this model need" before anything is downloaded and builds the real thing after (the loader keeps the
weights it handed out, by tensor names, for reports). Beyond that the engine sees:

- `activations()`: the buffers one forward step needs, by name and width; the engine allocates them for its
  largest step and hands them back, cut to each program's rows, as an `Activations`;
- `kv_widths()`: per layer, how many values one position keeps in each of the K and V caches (0: none);
- `state_widths()` (optional; default none): per state buffer, how many f32 values of fixed-size state one sequence
  keeps (a convolution's last inputs, a recurrent layer's matrix), allocated per slot beside the KV cache as
  `kv.state[i]` and kept right across new sequences, forks and truncation by `llmchat.runtime.kv_cache.KVCache`; usually
  one entry per layer (0: none), and a model whose layers keep several kinds of state lists more and says which
  index is whose;
- `record(rec, acts, kv, logits, context)`: the forward pass as dispatches, recorded once per step shape;
- `config` and `weight_bytes`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Protocol

from ..gguf.config import ModelConfig
from ..gpu.device import View
from ..gpu.recorder import Act, Recorder


@dataclass(frozen=True)
class ActivationSpec:
    """One activation buffer: `cols` f32 values per token (or per logits row when `per_out_row`)."""

    name: str
    cols: int
    per_out_row: bool = False


class Activations:
    """The buffers of one recorded forward pass: the step's token records and logits rows, and the model's
    activations by name (`acts.x`, `acts.qkv`, ...)."""

    def __init__(self, tokens: View, out_rows: View, acts: dict[str, Act], per_out_row: frozenset[str]):
        self.tokens = tokens  # (id, position, sequence slot, 0) per token
        self.out_rows = out_rows  # token rows whose logits are wanted, in order
        self._acts = acts
        self._per_out_row = per_out_row

    def __getattr__(self, name: str) -> Act:
        try:
            return self.__dict__["_acts"][name]
        except KeyError:
            raise AttributeError(f"the model declared no activation '{name}'") from None

    def __contains__(self, name: str) -> bool:
        return name in self._acts

    def cut(self, rows: int, out_rows: int) -> "Activations":
        """The same buffers seen as holding `rows` tokens and `out_rows` logits rows."""
        acts = {name: Act(a.buffer, out_rows if name in self._per_out_row else rows, a.cols)
                for name, a in self._acts.items()}
        return Activations(self.tokens, self.out_rows, acts, self._per_out_row)


class Model(Protocol):
    """What the engine may use of a model (see the module docstring). The class also names its config type as
    `Config`, which the registry uses to parse metadata."""

    Config: ClassVar[type[ModelConfig]]
    config: ModelConfig
    weight_bytes: int

    def activations(self) -> list[ActivationSpec]: ...

    def kv_widths(self) -> list[int]: ...

    def record(self, rec: Recorder, acts: Activations, kv, logits: Act, context: int | None = None) -> None: ...


def state_widths(model) -> list[int]:
    """The model's state widths (`Model.state_widths`), or none for a model that keeps no state."""
    widths = getattr(model, "state_widths", None)
    return list(widths()) if widths is not None else []

