"""A second device on a CPU-only machine, to prove that no op mixes devices.

`DeviceCheck` makes `meta` behave like an accelerator that holds real data: a tensor placed
on `meta` (by `.to("meta")`, a factory with `device="meta"`, `torch.tensor(..., device=...)`)
becomes an `OnDevice` wrapper that reports `device(type='meta')` and keeps its values in a
CPU tensor inside.  Every op then runs for real — losses have values, `.item()` and
`.tolist()` work, sampling loops stop at their stop tokens — while the check looks at each
op's arguments:

- an op that takes a device tensor and a host tensor with at least one dimension is recorded
  as a violation (0-dim host tensors are allowed, as CUDA allows CPU scalars), except an in-place
  copy (`dst.copy_(src)`, what `load_state_dict` does), which CUDA runs across devices;
- an op that takes a `generator=` whose device is not the op's device is recorded too.
  `torch.Generator(device="meta")` cannot exist, so while the check runs `torch.Generator` is a
  subclass that accepts the virtual device and remembers it.

On plain `meta` tensors PyTorch itself does not complain about `gather`, indexing or
`embedding` with CPU indices; here every op's arguments are inspected, so those are caught
as they would be on a GPU.  Violations are recorded (with the innermost frame of our own
code) and the op still runs on the host values, so one pass reports every site.  This is a
stand-in for a GPU, which this machine does not have: it checks placement, not kernels.
"""

from __future__ import annotations

import contextlib
import traceback
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

ROOT = Path(__file__).resolve().parents[1]

DEVICE = torch.device("meta")
_REAL_GENERATOR = torch.Generator
# Ops a GPU runs with one side on the host: an in-place copy transfers (`load_state_dict` into a model on the device).
CROSS_DEVICE = {torch.ops.aten.copy_.default}


def on_device(x) -> bool:
    return isinstance(x, torch.device) and x.type == DEVICE.type or isinstance(x, str) and x.startswith("meta")


class VirtualGenerator(_REAL_GENERATOR):
    """A CPU generator that may claim to live on the virtual device."""

    def __new__(cls, device="cpu"):
        gen = super().__new__(cls, "cpu")
        gen.virtual_device = torch.device(device)
        return gen

    def __init__(self, device="cpu"):
        pass


def generator_device(gen) -> torch.device:
    return getattr(gen, "virtual_device", gen.device)


class OnDevice(torch.Tensor):
    """A tensor on the virtual device; its values live in `self.host` (a CPU tensor)."""

    @staticmethod
    def __new__(cls, host: torch.Tensor):
        return torch.Tensor._make_wrapper_subclass(
            cls, host.shape, strides=host.stride(), storage_offset=host.storage_offset(), dtype=host.dtype,
            device=DEVICE, requires_grad=host.requires_grad)

    def __init__(self, host: torch.Tensor):
        self.host = host

    def __repr__(self) -> str:
        return f"OnDevice({self.host!r})"

    __torch_function__ = torch._C._disabled_torch_function_impl

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        return _CHECK.run(func, args, kwargs or {})


@dataclass
class Violation:
    op: str
    devices: list[str]
    where: str

    def __str__(self) -> str:
        return f"{self.op} mixes {', '.join(self.devices)} at {self.where}"


def relative(filename: str) -> str:
    """A source path from the checkout's root (`lmrl/...`, `tests/...`), wherever the checkout lies."""
    path = Path(filename).resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else filename


def _our_frame() -> str:
    """The innermost stack frame in lmrl/ (or the test) that led to the op."""
    for frame in reversed(traceback.extract_stack()[:-3]):
        if ("/lmrl/" in frame.filename or "/tests/" in frame.filename) and "device_check" not in frame.filename:
            return f"{relative(frame.filename)}:{frame.lineno} {frame.name}: {frame.line}"
    return "outside lmrl"


def _wrap(x):
    with torch.inference_mode(False):  # a wrapper made in inference mode cannot take part in views
        return _wrap_now(x)


def _wrap_now(x):
    return OnDevice(x) if isinstance(x, torch.Tensor) and not isinstance(x, OnDevice) else x


class _State:
    def __init__(self):
        self.violations: list[Violation] = []

    def check_generator(self, func, args, kwargs) -> None:
        """The generator must live where the op samples (the dispatcher hands ops a bare generator,
        so this runs at the Python API, where the generator object is the one the code made)."""
        gen = kwargs.get("generator")
        if gen is None:
            return
        op_on_device = on_device(kwargs.get("device")) or any(
            isinstance(a, OnDevice) for a in tree_flatten((args, kwargs))[0])
        if (generator_device(gen).type == DEVICE.type) != op_on_device:
            self.record(getattr(func, "__name__", str(func)),
                        [f"generator on {generator_device(gen)}", "op on " + ("meta" if op_on_device else "cpu")])

    def record(self, op, devices) -> None:
        self.violations.append(Violation(str(op), sorted(set(devices)), _our_frame()))

    def run(self, func, args, kwargs):
        """Check the op's arguments, run it on host values, put tensor results on the virtual device."""
        flat, _ = tree_flatten((args, kwargs))
        tensors = [a for a in flat if isinstance(a, torch.Tensor)]
        device_args = [t for t in tensors if isinstance(t, OnDevice)]
        host_args = [t for t in tensors if not isinstance(t, OnDevice) and t.dim() > 0]
        devices = [a for a in flat if isinstance(a, torch.device)]  # a factory's or a copy's target
        wants_device = any(on_device(d) for d in devices)
        if device_args and host_args and func not in CROSS_DEVICE:
            self.record(func, ["meta"] + [str(t.device) for t in host_args])
        args, kwargs = tree_map(_to_host, args), tree_map(_to_host, kwargs)
        out = func(*args, **kwargs)
        to_host = bool(devices) and not wants_device  # e.g. `.cpu()`: the result is a host tensor
        if to_host or not (wants_device or device_args):
            return out
        return tree_map(_wrap, out)


def _to_host(x):
    """Host values for the op: wrappers unwrapped, the virtual device replaced by the CPU."""
    if isinstance(x, OnDevice):
        return x.host
    return torch.device("cpu") if on_device(x) else x


_CHECK = _State()


class _Dispatch(TorchDispatchMode):
    """Factory ops asking for the virtual device (no device tensor among their arguments)."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        flat = tree_flatten((args, kwargs))[0]
        if any(isinstance(a, OnDevice) for a in flat):
            return func(*args, **kwargs)  # OnDevice.__torch_dispatch__ takes it
        if any(on_device(a) for a in flat):
            return _CHECK.run(func, args, kwargs)
        return func(*args, **kwargs)


class _Functions(TorchFunctionMode):
    """`torch.tensor` / `as_tensor` build from Python data below the dispatcher: place them here."""

    BUILDERS = (torch.tensor, torch.as_tensor, torch.asarray)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        _CHECK.check_generator(func, args, kwargs)
        if func in self.BUILDERS and on_device(kwargs.get("device")):
            host = func(*args, **{**kwargs, "device": "cpu"})
            return OnDevice(host)
        if func in (torch.Tensor.__getitem__, torch.Tensor.__setitem__) and isinstance(args[0], OnDevice):
            args = (args[0], _device_list_index(args[1]), *args[2:])
        if func is torch.Tensor.tolist and isinstance(args[0], OnDevice):
            return args[0].host.tolist()  # a copy to the host, as on a GPU
        if func is torch.Tensor.numpy and isinstance(args[0], OnDevice):
            raise TypeError("can't convert a device tensor to numpy: call .cpu() first (as on a GPU)")
        return func(*args, **kwargs)


def _device_list_index(index):
    """A Python list inside an index becomes an index tensor on the indexed tensor's device (PyTorch
    builds it there below the dispatcher, where its values would be out of reach here)."""
    if isinstance(index, tuple):
        return tuple(_device_list_index(i) for i in index)
    if isinstance(index, list):
        return OnDevice(torch.tensor(index))
    return index


@contextlib.contextmanager
def device_check():
    """Inside the block `meta` is a device with data; yields the list violations are appended to."""
    _CHECK.violations = []
    torch.Generator = VirtualGenerator
    try:
        # `module.to(device)` keeps each Parameter object (and so tied weights), as a move to a GPU does;
        # a plain `.to` to the wrapper type would make new Parameter objects, one per module
        with swapping_parameters(True), _Functions(), _Dispatch():
            yield _CHECK.violations
    finally:
        torch.Generator = _REAL_GENERATOR


@contextlib.contextmanager
def swapping_parameters(on: bool):
    """PyTorch's switch for moving a module's parameters by swapping them in place."""
    before = torch.__future__.get_swap_module_params_on_conversion()
    torch.__future__.set_swap_module_params_on_conversion(on)
    try:
        yield
    finally:
        torch.__future__.set_swap_module_params_on_conversion(before)


def report(violations: list[Violation], limit: int = 20) -> str:
    """One line per distinct site, first seen first."""
    seen = list(dict.fromkeys(str(v) for v in violations))
    return "\n".join(seen[:limit]) + (f"\n... and {len(seen) - limit} more" if len(seen) > limit else "")
