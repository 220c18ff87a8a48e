"""How traced values print inside jit, vmap, grad and jvp (JitTracer(~float32[]), VmapTracer(aval=..., batched=...),
...), compared with JAX 0.10.2."""
import jax
import jax.numpy as jjnp
import pytest

import meshax
import meshax.numpy as mnp

CASES = {
    "jit weak scalar": lambda lib, np_, show: lib.jit(show)(1.0),
    "jit array": lambda lib, np_, show: lib.jit(show)(np_.ones((2, 3))),
    "jit int": lambda lib, np_, show: lib.jit(show)(np_.arange(4)),
    "vmap": lambda lib, np_, show: lib.vmap(show)(np_.ones((2, 3))),
    "vmap in_axes=1": lambda lib, np_, show: lib.vmap(show, in_axes=1)(np_.ones((2, 3))),
    "grad": lambda lib, np_, show: lib.grad(show)(1.0),
    "jvp": lambda lib, np_, show: lib.jvp(show, (1.0,), (1.0,)),
    "jit of vmap": lambda lib, np_, show: lib.jit(lib.vmap(show))(np_.ones((2, 3))),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_tracers_print_as_in_jax(case):
    def run(lib, np_):
        printed = []

        def show(x):
            printed.append(repr(x))
            return x

        CASES[case](lib, np_, show)
        return printed

    assert run(meshax, mnp) == run(jax, jjnp)
