"""Records the dispatches of one forward pass into a `Program`, once per model and batch shape."""
from __future__ import annotations

import struct
from dataclasses import dataclass

from .device import Buffer, Device, Dispatch, Program, Traffic
from .kernels import Kernels


@dataclass(frozen=True)
class Act:
    """An activation: `rows` tokens of `cols` f32 values, row-major, in `buffer`."""

    buffer: Buffer
    rows: int
    cols: int


class Recorder:
    """Collects dispatches; every dispatch gets its own small uniform `Params` buffer, written once here.

    `step` and `out_step` are uniforms shared by all dispatches of a program, rewritten each step: their first u32 is
    the number of tokens in the step, and the number of rows that produce logits.
    """

    def __init__(self, device: Device, kernels: Kernels, step: Buffer, out_step: Buffer | None = None, *,
                 q8_activations: bool = False):
        """`q8_activations`: matmuls over quantized weights round each 32-element block of x to 8 bits first, as
        llama.cpp does (its numbers, at the cost of precision); otherwise x stays f32."""
        self.device = device
        self.q8_activations = q8_activations
        self.kernels = kernels
        self.step = step
        self.out_step = out_step
        self.dispatches: list[Dispatch] = []
        self._empty: Buffer | None = None
        self._scratch: Buffer | None = None

    def params(self, label: str, fmt: str, *values) -> Buffer:
        data = struct.pack("<" + fmt, *values)
        data += bytes(-len(data) % 16)  # uniform structs are sized in 16-byte units
        buf = self.device.buffer(len(data), f"{label}.params", uniform=True)
        self.device.write(buf, data)
        return buf

    def empty(self) -> Buffer:
        """A tiny buffer bound where a kernel declares an optional input it is told not to read."""
        if self._empty is None:
            self._empty = self.device.buffer(16, "empty")
        return self._empty

    def scratch(self, nbytes: int) -> Buffer:
        """A buffer for partial results that the next dispatch consumes (attention ranges, top-k chunks).

        Dispatches run in order, so one buffer serves every layer of the program; a later, larger need gets a
        new one (earlier dispatches keep theirs)."""
        if self._scratch is None or self._scratch.size < nbytes:
            self._scratch = self.device.buffer(nbytes, "scratch")
        return self._scratch

    def act(self, label: str, rows: int, cols: int) -> Act:
        return Act(self.device.buffer(rows * cols * 4, label), rows, cols)

    def add(self, kernel, bindings: tuple, grid: tuple[int, int, int], traffic: Traffic | None = None) -> None:
        self.dispatches.append(Dispatch(kernel, tuple(bindings), grid, traffic))

    def finish(self) -> Program:
        return self.device.program(self.dispatches)


def cdiv(a: int, b: int) -> int:
    return -(-a // b)
